"""How a plan reads, carries and returns a source's MAP columns.

Spark cannot group or compare a MAP, and a change is consolidated, and a delta matched
with the table's rows, by every column it has; so a MAP is read by what it is made of:
its values at constant keys (columns of their own, see map_values.py), or its entries
(``map_entries``: an array of (key, value) structs Spark can group), read back as
``map_from_entries`` where the query takes the MAP apart. The functions here rewrite a
built plan so; what they cannot rewrite is left a MAP, and build.py makes the query
FULL (MAP_COLUMN) for it.

Pure sqlglot: no Spark here.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import replace

from sqlglot import exp

from dyntables.plan import map_values
from dyntables.plan.calls import picked_value
from dyntables.plan.map_values import groupable
from dyntables.plan.ops import (
    RECOMPUTED,
    Aggregate,
    Node,
    Project,
    Scan,
    Schema,
    UnionAll,
    Window,
    col,
    map_exprs,
    map_nodes,
    map_own_exprs,
    replace_nodes,
    walk_post_order,
)

# calls that take a MAP apart into values Spark can group: the MAP is their first
# argument (``this``), or their only one
_TAKE_APART = (exp.Explode, exp.ArraySize, exp.MapKeys, exp.MapContainsKey, exp.JSONFormat)
_TAKE_APART_CALLS = frozenset({"cardinality", "map_values", "map_entries"})


def _takes_apart(column: exp.Column) -> bool:
    """Whether ``column`` (a MAP) is read by a call that takes it apart (its values at a
    key read from the row, its size, keys, entries, rows, whether it is NULL), not
    selected, compared or passed on whole."""
    parent = column.parent
    if isinstance(parent, exp.Is):  # IS [NOT] NULL reads whether there is a MAP at all
        return column.arg_key == "this" and isinstance(parent.expression, exp.Null)
    if isinstance(parent, (exp.Bracket, *_TAKE_APART)):
        return column.arg_key == "this"
    return isinstance(parent, exp.Anonymous) and parent.name.lower() in _TAKE_APART_CALLS


def read_map_values(
    root: Node, schema: Schema, outputs: frozenset[int] = frozenset()
) -> tuple[Node, frozenset[str]]:
    """Each ``m[<constant>]`` of a MAP column ``m`` of a scan read by the scan itself, as
    a column of its own, and ``m`` taken apart otherwise (``explode(m)``, ``size(m)``)
    read from its entries (see map_values.py); also where a projection passes ``m`` on
    under its name or another (a CTE's or derived table's ``SELECT *``): the columns read
    of it are passed on instead, and ``m`` itself no more where nothing reads it whole.
    A MAP read otherwise stays, and prune.prune_scans makes the query FULL for it."""
    # a MAP column's name, at its scan or passed on by projections -> (the scan, by its
    # outputs, unique in a plan; its MAP column; the scan's name for it)
    maps: dict[str, tuple[tuple[str, ...], str, str]] = {}
    for n in walk_post_order(root):
        if isinstance(n, Scan):
            types = dict(schema.get(n.table, []))
            for source, out in zip(n.source_columns, n.out, strict=True):
                value = map_values.value_type(types.get(source, ""))
                if value is not None and groupable(value):
                    maps[out] = (n.out, source, out)
        elif isinstance(n, Project):
            for e, out in zip(n.exprs, n.out, strict=True):
                if _passes_on(e, maps):
                    maps[out] = maps[e.name]
    read: dict[tuple[str, ...], dict[str, str]] = {}  # scan -> {output: scanned column}
    root, through = _maps_held_as_entries(root, maps, read, outputs)
    root, carried = _map_outputs_as_entries(root, outputs, maps, read, through)
    if not maps:
        return root, carried

    def at_key(e: exp.Expr) -> exp.Expr:
        target, keys = e.this, e.expressions
        if (
            isinstance(e, exp.Bracket)
            and isinstance(target, exp.Column)
            and not target.table
            and target.name in maps
            and len(keys) == 1
            and isinstance(keys[0], exp.Literal)
            and not e.args.get("safe")
        ):
            scan, source, base = maps[target.name]
            out = map_values.output_name(base, keys[0])
            read.setdefault(scan, {})[out] = map_values.value_column(source, keys[0])
            return col(out)
        return e

    def entries(e: exp.Expr) -> exp.Expr:
        if _entries_call(e) and (name := _column_name(e.expressions[0])) in maps:
            return _entries_of(name, maps, read)  # not map_entries(map_from_entries(...))
        if isinstance(e, exp.Column) and not e.table and e.name in maps and _takes_apart(e):
            return _rebuilt(e.name, maps, read)
        return e

    root = map_exprs(root, lambda e: e.transform(at_key).transform(entries))

    def reading(n: Node) -> Node:
        if isinstance(n, Scan) and read.get(n.out):
            values = read[n.out]
            return Scan(n.table, n.source_columns + tuple(values.values()), n.out + tuple(values))
        if isinstance(n, Project):
            # what is read of a MAP it passes on, passed on too (under the scan's names)
            extra: list[str] = []
            for e in n.exprs:
                if _passes_on(e, maps):
                    scan = maps[e.name][0]
                    extra += [c for c in read.get(scan, {}) if c not in n.out + tuple(extra)]
            if extra:
                return replace(
                    n, exprs=n.exprs + tuple(col(c) for c in extra), out=n.out + tuple(extra)
                )
        return n

    return map_nodes(root, reading), carried


def _entries_call(e: exp.Expr) -> bool:
    return (
        isinstance(e, exp.Anonymous) and e.name.lower() == "map_entries" and len(e.expressions) == 1
    )


def _column_name(e: exp.Expr) -> str:
    """The name of an unqualified column (internal names are), or ``""``."""
    return e.name if isinstance(e, exp.Column) and not e.table else ""


def _entries_of(
    name: str,
    maps: Mapping[str, tuple[tuple[str, ...], str, str]],
    read: dict[tuple[str, ...], dict[str, str]],
) -> exp.Column:
    """The column holding the entries of the source MAP ``name`` (at its scan or passed
    on by projections), which its scan now reads."""
    scan, source, base = maps[name]
    out = map_values.entries_output(base)
    read.setdefault(scan, {})[out] = map_values.entries_column(source)
    return col(out)


def _rebuilt(
    name: str,
    maps: Mapping[str, tuple[tuple[str, ...], str, str]],
    read: dict[tuple[str, ...], dict[str, str]],
) -> exp.Expr:
    """The source MAP ``name`` rebuilt from its entries (the same MAP, in its order)."""
    return exp.Anonymous(this="map_from_entries", expressions=[_entries_of(name, maps, read)])


class _Unread(Exception):
    """A MAP carried as its entries is read where they cannot stand in for it."""


def _maps_held_as_entries(
    root: Node,
    maps: Mapping[str, tuple[tuple[str, ...], str, str]],
    read: dict[tuple[str, ...], dict[str, str]],
    outputs: frozenset[int] = frozenset(),
) -> tuple[Node, frozenset[str]]:
    """``root`` with each source MAP that an operator passes on where no projection can
    follow it passed on as its entries, and read above it as ``map_from_entries`` of
    them; and the names above that hold such entries. A UNION ALL reads its inputs by
    position (every input's projection passing one on at the same position), and an
    aggregate (``FIRST(m)``, ``MAX_BY(m, ts)``) or a window function (``LAG(m)``) that
    returns one row's MAP returns a value of its own: the columns read of the MAP cannot
    follow it through as they follow projections, and Spark cannot group or compare the
    MAP in a state or a delta. Above, the MAP may be passed on as it is, or read by what
    takes it apart (its values, size, keys, rows, whether it is NULL), as a source's MAP
    may; read otherwise (compared, aggregated otherwise, a UNION mixing it with a MAP),
    ``root`` is left as it is, and the query FULL. The last projection may also build
    a MAP of it at ``outputs`` (``coalesce(FIRST(m), map())``), which
    _map_outputs_as_entries then takes apart where it is built."""
    if isinstance(root, UnionAll):  # the table's own columns: _map_outputs_as_entries
        rebuilt = [_maps_held_as_entries(c, maps, read, outputs) for c in root.inputs]
        return replace(root, inputs=tuple(c for c, _ in rebuilt)), frozenset().union(
            *(held for _, held in rebuilt)
        )
    held: set[str] = set()
    taken: dict[tuple[str, ...], dict[str, str]] = {}  # the reads, kept if it all works

    def held_column(e: exp.Expr) -> bool:
        return isinstance(e, exp.Column) and not e.table and e.name in held

    def whole(e: exp.Expr, keep: exp.Expr | None = None) -> exp.Expr:
        """``e`` reading the MAPs held as entries from them, where they are taken apart;
        ``keep``: a column of ``e`` (the caller's copy) that stays entries."""
        for c in e.find_all(exp.Column):
            if c is not keep and held_column(c) and not _takes_apart(c):
                raise _Unread

        def read(n: exp.Expr) -> exp.Expr:
            if _entries_call(n) and held_column(n.expressions[0]):
                return n.expressions[0].copy()  # its entries are what it holds
            return n if n is keep else from_entries(n)

        return e.transform(read, copy=keep is None)

    def from_entries(n: exp.Expr) -> exp.Expr:
        """A column holding a MAP's entries read as the MAP."""
        if held_column(n):
            return exp.Anonymous(this="map_from_entries", expressions=[n.copy()])
        return n

    def pick(e: exp.Expr) -> exp.Expr | None:
        """``e`` returning the entries of the MAP it returns, or None if it returns none."""
        mine = e.copy()
        call = picked_value(mine)
        target = call.this if call is not None else None
        if not (isinstance(target, exp.Column) and not target.table):
            return None
        if not held_column(target):
            if not _passes_on(target, maps):
                return None
            target = target.replace(_entries_of(target.name, maps, taken))
        return whole(mine, keep=target)

    def carry(n: Node) -> Node:
        if isinstance(n, UnionAll):
            firsts = [c for c in n.inputs if isinstance(c, Project)]
            if len(firsts) != len(n.inputs):
                if any(held_column(e) for c in n.inputs for e in map(col, c.columns)):
                    raise _Unread
                return n
            inputs = [list(p.exprs) for p in firsts]
            for i, out in enumerate(n.out):
                at = [p.exprs[i] for p in firsts]
                if all(_passes_on(e, maps) or held_column(e) for e in at):
                    for exprs, e in zip(inputs, at, strict=True):
                        if not held_column(e):
                            exprs[i] = _entries_of(e.name, maps, taken)
                    held.add(out)
                elif any(held_column(e) for e in at):  # entries beside a MAP
                    raise _Unread
            return replace(
                n,
                inputs=tuple(
                    replace(p, exprs=tuple(e)) for p, e in zip(firsts, inputs, strict=True)
                ),
            )
        if isinstance(n, Aggregate):
            picks = {a.column: pick(a.arg) for a in n.aggs if a.func == RECOMPUTED and a.arg}
            if held or any(p is not None for p in picks.values()):
                aggs = []
                for a in n.aggs:
                    picked = picks.get(a.column)
                    if picked is not None:
                        held.add(a.column)
                    if picked is None and a.arg is not None:
                        picked = whole(a.arg)
                    aggs.append(replace(a, arg=picked))
                return replace(n, keys=tuple(map(whole, n.keys)), aggs=tuple(aggs))
        if isinstance(n, Window):
            picks = {out: pick(f) for f, out in zip(n.funcs, n.func_columns, strict=True)}
            if held or any(p is not None for p in picks.values()):
                funcs = []
                for f, out in zip(n.funcs, n.func_columns, strict=True):
                    picked = picks[out]
                    if picked is not None:
                        held.add(out)
                    funcs.append(whole(f) if picked is None else picked)
                return replace(
                    n, partition_by=tuple(map(whole, n.partition_by)), funcs=tuple(funcs)
                )
        if not held:
            return n
        if isinstance(n, Project):
            exprs = []
            for e, out in zip(n.exprs, n.out, strict=True):
                if held_column(e):
                    held.add(out)  # passed on as it is: still its entries
                    exprs.append(e)
                else:
                    exprs.append(whole(e))
            return replace(n, exprs=tuple(exprs))
        return map_own_exprs(n, whole)

    def last(n: Project) -> Project:
        """The last projection: a MAP it builds at ``outputs`` may read the entries."""
        exprs = []
        for i, (e, out) in enumerate(zip(n.exprs, n.out, strict=True)):
            if held_column(e):
                held.add(out)
                exprs.append(e)
            elif i in outputs:
                exprs.append(e.transform(from_entries))
            else:
                exprs.append(whole(e))
        return replace(n, exprs=tuple(exprs))

    try:
        if isinstance(root, Project) and outputs:
            below = map_nodes(root.child, carry)
            carried = last(replace(root, child=below)) if held else carry(root)
        else:
            carried = map_nodes(root, carry)
    except _Unread:
        return root, frozenset()
    for scan, columns in taken.items():
        read.setdefault(scan, {}).update(columns)
    return carried, frozenset(held)


def _map_outputs_as_entries(
    root: Node,
    outputs: frozenset[int],
    maps: Mapping[str, tuple[tuple[str, ...], str, str]],
    read: dict[tuple[str, ...], dict[str, str]],
    through: frozenset[str] = frozenset(),
) -> tuple[Node, frozenset[str]]:
    """``root`` with each MAP it returns (at ``outputs``, the positions Spark types as a
    MAP, and wherever it passes on a source's MAP whole) returned as its entries, and the
    root's columns that now hold entries. A delta is consolidated and matched with the
    table's rows by every column, and Spark can group entries where it cannot group a
    MAP; the table's column is written as ``map_from_entries`` of them (the same MAP,
    its entries in the same order) and read as ``map_entries`` where it is matched. A
    source's MAP passed on whole is read as its entries by the scan; a MAP computed by
    the root's projection (``map('a', n)``, ``map_concat(m, ...)``) is computed there and
    taken apart at once, reading any source MAP in it from its entries; so is one
    computed below it (a CTE's) that projections pass on to the root as it is, and
    nothing else reads; one row's MAP an aggregate or a window function returns is
    entries already (_maps_held_as_entries). The root is a projection, or a UNION ALL of
    them; a MAP an aggregate or a window builds otherwise, or one read on its way up,
    stays a MAP, and the query FULL."""
    if isinstance(root, UnionAll):
        rebuilt = [_map_outputs_as_entries(c, outputs, maps, read, through) for c in root.inputs]
        carried = frozenset(
            out
            for i, out in enumerate(root.columns)
            if all(c.columns[i] in held for c, held in rebuilt)
        )
        return replace(root, inputs=tuple(c for c, _ in rebuilt)), carried
    if not isinstance(root, Project):
        return root, frozenset()

    def inner(e: exp.Expr) -> exp.Expr:
        if isinstance(e, exp.Column) and not e.table and e.name in maps:
            return _rebuilt(e.name, maps, read)
        return e

    def taken_apart(e: exp.Expr) -> exp.Expr:
        return exp.Anonymous(this="map_entries", expressions=[e.transform(inner)])

    exprs, held = list(root.exprs), set()
    below: dict[int, Project] = {}  # projections below computing a MAP the root returns
    for i, (e, out) in enumerate(zip(root.exprs, root.out, strict=True)):
        if _passes_on(e, maps):
            exprs[i] = _entries_of(e.name, maps, read)
        elif isinstance(e, exp.Column) and not e.table and e.name in through:
            pass  # entries already, passed on from below a UNION
        elif i in outputs and not isinstance(e, exp.Column):
            exprs[i] = taken_apart(e)
        elif (
            i in outputs
            and isinstance(e, exp.Column)
            and not e.table
            and (found := _computed_below(root, e.name))
        ):
            p, j = found
            computed = list(below.get(id(p), p).exprs)
            computed[j] = taken_apart(computed[j])
            below[id(p)] = replace(below.get(id(p), p), exprs=tuple(computed))
        else:
            continue
        held.add(out)
    if not held:
        return root, frozenset()
    return replace_nodes(replace(root, exprs=tuple(exprs)), below), frozenset(held)


def _computed_below(root: Project, name: str) -> tuple[Project, int] | None:
    """The projection below ``root`` computing the column ``name`` that ``root`` (and
    projections between) pass on as it is, and its position there; None when the column
    comes from elsewhere (a scan, an aggregate, a window, a UNION), or anything reads it
    but those projections, which could not read it as its entries."""
    defined = {
        out: (n, j)
        for n in walk_post_order(root.child)
        if isinstance(n, Project)
        for j, out in enumerate(n.out)
    }
    chain = [name]
    while chain[-1] in defined:
        p, j = defined[chain[-1]]
        e = p.exprs[j]
        if not isinstance(e, exp.Column):
            break
        if e.table or e.name in chain:  # a projection may pass a column on by its name
            return None
        chain.append(e.name)
    if chain[-1] not in defined:
        return None
    reads: collections.Counter[str] = collections.Counter()

    def count(e: exp.Expr) -> exp.Expr:
        reads.update(c.name for c in e.find_all(exp.Column) if c.name in chain)
        return e

    map_exprs(root, count)
    # each name read once: by the projection passing it on (the first, by the root)
    if any(reads[c] != 1 for c in chain):
        return None
    return defined[chain[-1]]


def _passes_on(e: exp.Expr, maps: Mapping[str, object]) -> bool:
    """Whether a projection's ``e`` is a MAP column passed on whole."""
    return isinstance(e, exp.Column) and not e.table and e.name in maps
