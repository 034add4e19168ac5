"""Delta rules, one per operator, and the full-relation rules they build on.

For a node N over sources that moved from snapshot S to S':
  rel(N, "old") is N over the sources at S, rel(N, "new") over S',
  delta(N) is the Z-set rel(N, "new") - rel(N, "old") as rows with a weight column.
A rule only ever reads the deltas of its inputs and old/new versions of its inputs,
so composing rules composes deltas (DBSP). ``None`` means "no change below here".
Stateful operators (aggregates) are executed by the refresh and arrive here
*materialized*: their old/new values and delta are views the executor registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from dyntables.ivm.sqlb import (
    W,
    alias,
    col,
    eq_all,
    fresh_alias,
    lit,
    null_safe_eq_all,
    select,
    sub,
    typed_null,
    union_all,
)
from dyntables.plan.ops import (
    Aggregate,
    Constant,
    Filter,
    Generate,
    Join,
    Node,
    Project,
    Scan,
    UnionAll,
    Window,
    walk_post_order,
)
from dyntables.plan.query import parse_rows

OLD = "old"
NEW = "new"


@dataclass(frozen=True)
class Materialized:
    """A stateful node after the executor ran it: SQL for its value before and after
    the refresh, and its delta (None when its input did not change)."""

    old: exp.Query
    new: exp.Query
    delta: exp.Query | None


class Sources(Protocol):
    def scan_rel(self, scan: Scan, version: str) -> exp.Query: ...

    def scan_delta(self, scan: Scan) -> exp.Query | None: ...

    def column_types(self, node: Node) -> Mapping[str, str]: ...

    def source_rows(self, scan: Scan) -> int | None: ...

    def delta_bounds(self, scan: Scan, column: str) -> tuple[exp.Expr, exp.Expr] | None: ...


class Renderer:
    """Renders rel/delta SQL of plan nodes. ``share``: given a delta's SQL, a query that
    reads it computed once (the refresh caches it); used for the inputs of outer, semi
    and anti joins, whose rules read their input's delta twice: without it, a chain of
    n such joins repeats the bottom delta 2^n times (a 4-way LEFT JOIN chain: 38 KB of
    SQL, 5-15 s to plan for 10 rows)."""

    def __init__(
        self,
        sources: Sources,
        materialized: Mapping[int, Materialized] | None = None,
        share: Callable[[exp.Query], exp.Query] | None = None,
    ) -> None:
        self.sources = sources
        self.materialized = dict(materialized or {})
        self.share = share
        self._shared: dict[int, exp.Query | None] = {}

    def rel(self, node: Node, version: str) -> exp.Query:
        if id(node) in self.materialized:
            m = self.materialized[id(node)]
            return (m.old if version == OLD else m.new).copy()
        return REL_RULES[type(node)](self, node, version)

    def delta(self, node: Node) -> exp.Query | None:
        if id(node) in self.materialized:
            d = self.materialized[id(node)].delta
            return d.copy() if d is not None else None
        if id(node) in self._shared:
            shared = self._shared[id(node)]
            return shared.copy() if shared is not None else None
        return DELTA_RULES[type(node)](self, node)

    def delta_read_twice(self, node: Node) -> None:
        """``node``'s delta is about to be read by two terms: computed once if it is a
        join's, union's or window's, or a projection or filter over one (a scan's is a
        cached change already, a filter's or projection's over a scan cheap)."""
        if self.share is None or id(node) in self._shared or id(node) in self.materialized:
            return
        below = node
        while isinstance(below, Project | Filter):  # decorrelated subqueries put these between
            below = below.child
        if not isinstance(below, Join | UnionAll | Window) or id(below) in self.materialized:
            return
        d = self.delta(node)
        self._shared[id(node)] = self.share(d) if d is not None else None


# -- full relations ------------------------------------------------------------------------


def _rel_scan(r: Renderer, n: Scan, version: str) -> exp.Query:
    return r.sources.scan_rel(n, version)


def _rel_constant(r: Renderer, n: Constant, version: str) -> exp.Query:
    """The rows, their columns renamed by position: ``SELECT * FROM (rows) AS a(c0, ...)``."""
    rows = parse_rows(n.sql)
    named = exp.TableAlias(
        this=exp.to_identifier(fresh_alias("k")), columns=[exp.to_identifier(c) for c in n.out]
    )
    return select([col(c) for c in n.out], exp.Subquery(this=rows, alias=named))


def _rel_filter(r: Renderer, n: Filter, version: str) -> exp.Query:
    return select(["*"], sub(r.rel(n.child, version))).where(n.predicate.copy())


def _rel_project(r: Renderer, n: Project, version: str) -> exp.Query:
    return select(
        [alias(e.copy(), c) for e, c in zip(n.exprs, n.out, strict=True)],
        sub(r.rel(n.child, version)),
    )


_JOIN_SQL = {
    "inner": "",
    "left": "left",
    "right": "right",
    "full": "full",
    "semi": "left semi",
    "anti": "left anti",
}


def _join_condition(n: Join) -> exp.Expr:
    parts = [eq_all(n.left_keys, n.right_keys)] if n.left_keys else []
    if n.residual is not None:
        parts.append(n.residual.copy())
    return exp.and_(*parts) if parts else exp.true()


def _rel_join(r: Renderer, n: Join, version: str) -> exp.Query:
    q = select([col(c) for c in n.columns], sub(r.rel(n.left, version)))
    return q.join(
        sub(r.rel(n.right, version)), on=_join_condition(n), join_type=_JOIN_SQL[n.kind] or None
    )


def _rel_union(r: Renderer, n: UnionAll, version: str) -> exp.Query:
    parts = [
        select(
            [alias(col(c), o) for c, o in zip(child.columns, n.out, strict=True)],
            sub(r.rel(child, version)),
        )
        for child in n.inputs
    ]
    return union_all(parts)


def _rel_aggregate(r: Renderer, n: Aggregate, version: str) -> exp.Query:
    raise AssertionError("aggregates are materialized by the refresh executor before rendering")


def _rel_window(r: Renderer, n: Window, version: str) -> exp.Query:
    return _window_over(n, r.rel(n.child, version))


def _window_over(n: Window, source: exp.Query) -> exp.Select:
    items: list[exp.Expr] = [col(c) for c in n.child.columns]
    items += [alias(f.copy(), c) for f, c in zip(n.funcs, n.func_columns, strict=True)]
    return select(items, sub(source))


def _generated(n: Generate, source: exp.Query, weighted: bool) -> exp.Select:
    """``source``'s rows each beside the rows ``n``'s generator makes of it, as a LATERAL
    VIEW (which names several generated columns, and keeps a row generating nothing
    when OUTER); a weighted row's generated rows carry its weight."""
    items = [col(c) for c in n.columns] + ([col(W)] if weighted else [])
    view = exp.Lateral(
        this=n.call.copy(),
        view=True,
        outer=n.outer,
        alias=exp.TableAlias(
            this=exp.to_identifier(fresh_alias("g")),
            columns=[exp.to_identifier(c) for c in n.out],
        ),
    )
    q = select(items, sub(source))
    q.set("laterals", [view])
    return q


def _rel_generate(r: Renderer, n: Generate, version: str) -> exp.Query:
    return _generated(n, r.rel(n.child, version), weighted=False)


REL_RULES: dict[type, Callable[..., exp.Query]] = {
    Scan: _rel_scan,
    Constant: _rel_constant,
    Filter: _rel_filter,
    Project: _rel_project,
    Join: _rel_join,
    UnionAll: _rel_union,
    Aggregate: _rel_aggregate,
    Window: _rel_window,
    Generate: _rel_generate,
}


# -- deltas ----------------------------------------------------------------------------------


def _delta_scan(r: Renderer, n: Scan) -> exp.Query | None:
    return r.sources.scan_delta(n)


def _delta_constant(r: Renderer, n: Constant) -> exp.Query | None:
    return None  # the same rows at every snapshot


def _delta_filter(r: Renderer, n: Filter) -> exp.Query | None:
    d = r.delta(n.child)
    return None if d is None else select(["*"], sub(d)).where(n.predicate.copy())


def _delta_project(r: Renderer, n: Project) -> exp.Query | None:
    d = r.delta(n.child)
    if d is None:
        return None
    items = [alias(e.copy(), c) for e, c in zip(n.exprs, n.out, strict=True)] + [col(W)]
    return select(items, sub(d))


def _delta_generate(r: Renderer, n: Generate) -> exp.Query | None:
    """A generator maps each row to rows of its own: the delta's rows generate the
    delta, each with its row's weight."""
    d = r.delta(n.child)
    return None if d is None else _generated(n, d, weighted=True)


def _delta_union(r: Renderer, n: UnionAll) -> exp.Query | None:
    """The changed branches' deltas, united. An unchanged branch is there too, with no
    rows: its columns' types widen the union's as they widen the relation's (a BIGINT
    beside a DOUBLE is a DOUBLE, where 2^53 and 2^53 + 1 are one value; a TIMESTAMP_NTZ
    beside a TIMESTAMP is read in the session's time zone), so the rows above group as
    the state does. Spark drops the empty branch once the types are settled."""
    parts = []
    changed = False
    for child in n.inputs:
        items = [alias(col(c), o) for c, o in zip(child.columns, n.out, strict=True)]
        d = r.delta(child)
        if d is None:
            weight = alias(exp.cast(lit(0), "bigint", dialect="spark"), W)
            parts.append(select([*items, weight], sub(r.rel(child, NEW))).where(exp.false()))
        else:
            changed = True
            parts.append(select([*items, col(W)], sub(d)))
    return union_all(parts) if changed else None


# a join's unchanged side with at least this many source rows is read only within the
# key range of the other side's change (one small job for the bounds): Iceberg skips
# the files whose column statistics lie outside it
PRUNE_MIN_ROWS = 100_000


def _inner_terms(r: Renderer, n: Join) -> list[exp.Query]:
    """d(L join R) = dL join R_old + L_new join dR (weights come from the delta side)."""
    cols = [col(c) for c in n.left.columns + n.right.columns] + [col(W)]
    terms: list[exp.Query] = []
    d_left = r.delta(n.left)
    d_right = r.delta(n.right)
    cond = _join_condition(n)
    if d_left is not None:
        right_old = r.rel(n.right, OLD)
        if n.prunable:
            right_old = _within_delta_keys(r, right_old, n.right, n.left, n.left_keys, n.right_keys)
        terms.append(select(cols, sub(d_left)).join(sub(right_old), on=cond.copy()))
    if d_right is not None:
        left_new = r.rel(n.left, NEW)
        if n.prunable:
            left_new = _within_delta_keys(r, left_new, n.left, n.right, n.right_keys, n.left_keys)
        terms.append(select(cols, sub(left_new)).join(sub(d_right), on=cond.copy()))
    return terms


def _within_delta_keys(
    r: Renderer,
    rel: exp.Query,
    node: Node,
    changed: Node,
    changed_keys: Sequence[exp.Expr],
    keys: Sequence[exp.Expr],
    keep_nulls: bool = False,
) -> exp.Query:
    """``rel`` (the unchanged side of an inner join term) restricted to the range of the
    changed side's join key: a row outside it equals no changed row's key (and a NULL
    key joins nothing), so the term is the same, and a large side is read only where
    the change can meet it. ``keep_nulls``: rows with a NULL key stay too (a window's
    NULL partition is a partition like any other)."""
    below = walk_post_order(node)
    scans = [s for s in below if isinstance(s, Scan)]
    if not scans or any(isinstance(m, Aggregate) for m in below):
        return rel
    rows = [r.sources.source_rows(s) for s in scans]
    if any(n is None for n in rows) or sum(n or 0 for n in rows) < PRUNE_MIN_ROWS:
        return rel
    for changed_key, key in zip(changed_keys, keys, strict=True):
        traced = _trace_to_scan(changed, changed_key)
        bounds = r.sources.delta_bounds(*traced) if traced is not None else None
        if bounds is not None:
            low, high = bounds
            within: exp.Expr = exp.Between(this=key.copy(), low=low, high=high)
            if keep_nulls:
                within = exp.or_(within, exp.Is(this=key.copy(), expression=exp.null()))
            return select(["*"], sub(rel)).where(within)
    return rel


def rel_within_change(r: Renderer, node: Node, keys: Sequence[exp.Expr], version: str) -> exp.Query:
    """``node``'s rows (at ``version``) whose ``keys`` can equal those of its own change
    (NULL keys kept): where a rule recomputes the groups or partitions its change
    touches, a large input is then read only within the change's range of a key."""
    rel = r.rel(node, version)
    if not keys:
        return rel
    return _within_delta_keys(r, rel, node, node, keys, keys, keep_nulls=True)


def _trace_to_scan(node: Node, key: exp.Expr) -> tuple[Scan, str] | None:
    """The source column a bare key column of ``node`` carries unchanged, through
    filters (which only drop rows), generators (which repeat them), windows partitioned
    by it (whose change is the rows of the partitions their input's change touches) and
    renaming projections. Not through a window by other keys: its change holds every row
    of a touched partition, whatever this column's value."""
    if not isinstance(key, exp.Column) or key.table:
        return None
    name = key.name
    while True:
        if (
            isinstance(node, Filter)
            or (isinstance(node, Generate) and name in node.child.columns)
            or (isinstance(node, Window) and _partitioned_by(node, name))
        ):
            node = node.child
        elif isinstance(node, Project):
            if name not in node.out:
                return None
            expr = node.exprs[node.out.index(name)]
            if not isinstance(expr, exp.Column) or expr.table:
                return None
            name, node = expr.name, node.child
        elif isinstance(node, Scan):
            return (node, name) if name in node.out else None
        else:
            return None


def _partitioned_by(node: Window, name: str) -> bool:
    return any(
        isinstance(p, exp.Column) and not p.table and p.name == name for p in node.partition_by
    )


def _changed_keys(
    d: exp.Query, keys: Sequence[exp.Expr], names: Sequence[str] | None = None
) -> tuple[exp.Query, list[str]]:
    """The distinct non-NULL values of ``keys`` in the change ``d`` (a NULL key joins
    nothing, so its rows' matches never change), as columns ``names`` (fresh ones by
    default)."""
    names = list(names) if names is not None else [fresh_alias("k") for _ in keys]
    values = (
        select([alias(k.copy(), nm) for k, nm in zip(keys, names, strict=True)], sub(d))
        .where(
            exp.and_(*(exp.Not(this=exp.Is(this=k.copy(), expression=exp.null())) for k in keys))
        )
        .distinct()
    )
    return values, names


def _flips(
    r: Renderer, right: Node, d_right: exp.Query, rkeys: Sequence[exp.Expr]
) -> tuple[exp.Query, list[str], str]:
    """The keys of ``right``'s change whose match status changed, each once with a sign
    column: +1 it has rows in ``right`` now and had none, -1 the other way round. Each
    version of ``right`` is read once, within its change's key range."""
    keys, names = _changed_keys(d_right, rkeys)
    sign = fresh_alias("s")
    on = eq_all([col(nm) for nm in names], rkeys)
    present = [
        select(["*", alias(lit(weight), sign)], sub(keys.copy())).join(
            sub(_within_delta_keys(r, r.rel(right, version), right, right, rkeys, rkeys)),
            on=on.copy(),
            join_type="left semi",
        )
        for version, weight in ((NEW, 1), (OLD, -1))
    ]
    total = exp.Sum(this=col(sign))
    flips = (
        select([*(col(nm) for nm in names), alias(total, sign)], sub(union_all(present)))
        .group_by(*(col(nm) for nm in names))
        .having(exp.NEQ(this=total.copy(), expression=lit(0)))
    )
    return flips, names, sign


def _match_flip_terms(
    r: Renderer,
    left: Node,
    right: Node,
    lkeys: Sequence[exp.Expr],
    rkeys: Sequence[exp.Expr],
    anti: bool,
    prunable: bool,
) -> list[exp.Query]:
    """Delta of the rows of ``left`` that have (semi) or lack (anti) a match in ``right``
    by key alone:

      semi: dL|{matched in R_new} + L_old|F with weight +1 / -1 as F's key became matched / unmatched
      anti: dL|{unmatched in R_new} + L_old|F with the opposite weight

    F being the keys of dR whose match status flipped: ``left`` is read once, at them
    (within dR's key range when it is large)."""
    lcols = [col(c) for c in left.columns]
    terms: list[exp.Query] = []
    d_left = r.delta(left)
    d_right = r.delta(right)
    if d_left is not None:
        right_new = r.rel(right, NEW)
        if prunable:
            right_new = _within_delta_keys(r, right_new, right, left, lkeys, rkeys)
        terms.append(
            select([*lcols, col(W)], sub(d_left)).join(
                sub(right_new),
                on=eq_all(lkeys, rkeys),
                join_type="left anti" if anti else "left semi",
            )
        )
    if d_right is not None:
        flips, names, sign = _flips(r, right, d_right, rkeys)
        left_old = r.rel(left, OLD)
        if prunable:
            left_old = _within_delta_keys(r, left_old, left, right, rkeys, lkeys)
        weight: exp.Expr = exp.Neg(this=col(sign)) if anti else col(sign)
        terms.append(
            select([*lcols, alias(weight, W)], sub(left_old)).join(
                sub(flips), on=eq_all(lkeys, [col(nm) for nm in names])
            )
        )
    return terms


def _recomputed_unmatched_terms(
    r: Renderer,
    left: Node,
    right: Node,
    lkeys: Sequence[exp.Expr],
    rkeys: Sequence[exp.Expr],
    residual: exp.Expr,
) -> list[exp.Query]:
    """Delta of the rows of ``left`` that lack a match in ``right`` (a full join's padded
    rows) when matching is ``lkeys = rkeys AND residual``: whether a row matches depends
    on the row, not only on its key, so the rows of every key either delta touches are
    recomputed, +as they are now, -as they were (identical pairs cancel later):

      L_new|K anti R_new - L_old|K anti R_old,  K = keys of dL and dR

    A changed row whose key is NULL matches nothing: its delta row counts as it is."""
    lcols = [col(c) for c in left.columns]
    d_left = r.delta(left)
    d_right = r.delta(right)
    if d_left is None and d_right is None:
        return []
    names = [fresh_alias("k") for _ in lkeys]
    key_sets = [
        _changed_keys(d, keys, names)[0]
        for d, keys in ((d_left, lkeys), (d_right, rkeys))
        if d is not None
    ]
    affected = select([col(nm) for nm in names], sub(union_all(key_sets))).distinct()
    in_affected = eq_all(lkeys, [col(nm) for nm in names])
    on = exp.and_(eq_all(lkeys, rkeys), residual.copy())
    terms: list[exp.Query] = []
    for version, weight in ((NEW, 1), (OLD, -1)):
        rows = select(["*"], sub(r.rel(left, version))).join(
            sub(affected.copy()), on=in_affected.copy(), join_type="left semi"
        )
        terms.append(
            select([*lcols, alias(lit(weight), W)], sub(rows)).join(
                sub(r.rel(right, version)), on=on.copy(), join_type="left anti"
            )
        )
    if d_left is not None:
        null_key = exp.or_(*(exp.Is(this=k.copy(), expression=exp.null()) for k in lkeys))
        terms.append(select([*lcols, col(W)], sub(d_left)).where(null_key))
    return terms


def _padded(
    r: Renderer, n: Join, terms: list[exp.Query], kept: Node, missing: Node, kept_first: bool
) -> exp.Query | None:
    """Unmatched rows of an outer join: the kept side's columns plus typed NULLs."""
    if not terms:
        return None
    types = r.sources.column_types(missing)
    nulls = [alias(typed_null(types[c]), c) for c in missing.columns]
    kept_cols: list[exp.Expr] = [col(c) for c in kept.columns]
    items = (kept_cols + nulls) if kept_first else (nulls + kept_cols)
    return select([*items, col(W)], sub(union_all(terms)))


def _unmatched(
    r: Renderer,
    n: Join,
    left: Node,
    right: Node,
    lkeys: Sequence[exp.Expr],
    rkeys: Sequence[exp.Expr],
) -> list[exp.Query]:
    """A full join's rows of ``left`` gaining/losing a match in ``right``: by key, or,
    when the join also has a condition over both sides, by recomputing the affected keys."""
    if n.residual is not None:
        return _recomputed_unmatched_terms(r, left, right, lkeys, rkeys, n.residual)
    return _match_flip_terms(r, left, right, lkeys, rkeys, anti=True, prunable=n.prunable)


def _kept_side(n: Join) -> tuple[Node, Node, tuple[exp.Expr, ...], tuple[exp.Expr, ...]] | None:
    """(kept, other, kept's keys, other's keys) of a join each of whose output rows comes
    from one row of its kept side, as a function of that row and of the other side's
    rows at its key (of all of them when there is no equality): LEFT, RIGHT, semi and
    anti joins. None for inner and full joins."""
    if n.kind in ("left", "semi", "anti"):
        return n.left, n.right, n.left_keys, n.right_keys
    if n.kind == "right":
        return n.right, n.left, n.right_keys, n.left_keys
    return None


def _kept_join(n: Join, rows: exp.Query, other: exp.Query, weight: exp.Expr) -> exp.Query:
    """``rows`` of ``n``'s kept side joined with ``other`` as the query joins them."""
    left, right = (other, rows) if n.kind == "right" else (rows, other)
    return select([*(col(c) for c in n.columns), alias(weight, W)], sub(left)).join(
        sub(right), on=_join_condition(n), join_type=_JOIN_SQL[n.kind]
    )


def _delta_kept_side(r: Renderer, n: Join) -> exp.Query | None:
    """The delta of a LEFT, RIGHT, semi or anti join. Its output is a function of each
    kept row and of the other side's rows at the row's key; where the other side did
    not change at a key, neither did the output of the kept rows there. So, K being
    the non-NULL keys of the other side's change (every key when the join has no
    equality):

      d = dKept JOIN Other_new + Kept_old|K JOIN Other_new - Kept_old|K JOIN Other_old

    (JOIN as the query joins). The kept side is read once, at K, and only there (a
    star's fact table under a changed dimension row; the level below in a chain of
    decorrelated scalar subqueries); a large other side is read within its change's
    key range. When the other side did not change, only the first term remains (a fact
    table's new rows against its dimensions). A semi or anti join by key alone reads
    the kept rows only at the keys whose match status flipped (``_match_flip_terms``)."""
    sides = _kept_side(n)
    assert sides is not None
    kept, other, keys, other_keys = sides
    d_other = r.delta(other)
    if d_other is not None and n.kind in ("semi", "anti") and keys and n.residual is None:
        r.delta_read_twice(other)  # _flips reads its keys against both versions
        return union_all(
            _match_flip_terms(
                r, n.left, n.right, n.left_keys, n.right_keys, n.kind == "anti", n.prunable
            )
        )
    d_kept = r.delta(kept)
    terms: list[exp.Query] = []
    if d_kept is not None:
        other_new = r.rel(other, NEW)
        if n.prunable:
            other_new = _within_delta_keys(r, other_new, other, kept, keys, other_keys)
        terms.append(_kept_join(n, d_kept, other_new, col(W)))
    if d_other is None:
        return union_all(terms) if terms else None
    at_keys = r.rel(kept, OLD)
    if keys:
        changed, names = _changed_keys(d_other, other_keys)
        if n.prunable:
            at_keys = _within_delta_keys(r, at_keys, kept, other, other_keys, keys)
        at_keys = select(["*"], sub(at_keys)).join(
            sub(changed), on=eq_all(keys, [col(nm) for nm in names]), join_type="left semi"
        )
    if r.share is not None:  # read by two terms
        at_keys = r.share(at_keys)

    def other_at_keys(version: str) -> exp.Query:
        # the rows at K lie within the range of the other side's own change; its keys
        # are compared with bounds of their own type (``prunable`` is not needed)
        rel = r.rel(other, version)
        return _within_delta_keys(r, rel, other, other, other_keys, other_keys)

    terms.append(_kept_join(n, at_keys.copy(), other_at_keys(NEW), lit(1)))
    terms.append(_kept_join(n, at_keys, other_at_keys(OLD), lit(-1)))
    return union_all(terms)


def _delta_join(r: Renderer, n: Join) -> exp.Query | None:
    if _kept_side(n) is not None:
        return _delta_kept_side(r, n)
    if n.kind == "full":  # the inner and padding terms each read an input's delta
        r.delta_read_twice(n.left)
        r.delta_read_twice(n.right)
    parts = _inner_terms(r, n)
    if n.kind == "full":
        terms = _unmatched(r, n, n.left, n.right, n.left_keys, n.right_keys)
        pad = _padded(r, n, terms, n.left, n.right, True)
        if pad is not None:
            parts.append(pad)
        terms = _unmatched(r, n, n.right, n.left, n.right_keys, n.left_keys)
        pad = _padded(r, n, terms, n.right, n.left, False)
        if pad is not None:
            parts.append(pad)
    return union_all(parts) if parts else None


def _delta_aggregate(r: Renderer, n: Aggregate) -> exp.Query | None:
    raise AssertionError("aggregates are materialized by the refresh executor before rendering")


def _delta_window(r: Renderer, n: Window) -> exp.Query | None:
    """Recompute the partitions whose keys appear in the input delta (all of it when
    there is no PARTITION BY): +new partition rows, -old partition rows. A large input
    is read only within the change's range of a partition key (NULL partitions kept), so
    Iceberg skips the files that hold no partition the change touches: a deduplication
    (``ROW_NUMBER() OVER (PARTITION BY id ...) = 1``) of new ids reads their files, not
    the whole history twice."""
    d = r.delta(n.child)
    if d is None:
        return None
    if n.partition_by:
        names = [fresh_alias("p") for _ in n.partition_by]
        keys = select(
            [alias(p.copy(), nm) for p, nm in zip(n.partition_by, names, strict=True)], sub(d)
        ).distinct()
        on = null_safe_eq_all(list(n.partition_by), [col(nm) for nm in names])
    else:
        keys = select([alias(exp.true(), "_any")], sub(d)).limit(1)
        on = exp.true()

    def restricted(version: str) -> exp.Select:
        rel = rel_within_change(r, n.child, n.partition_by, version)
        inner = select(["*"], sub(rel)).join(sub(keys.copy()), on=on.copy(), join_type="left semi")
        return _window_over(n, inner)

    cols = [col(c) for c in n.columns]
    plus = select([*cols, alias(lit(1), W)], sub(restricted(NEW)))
    minus = select([*cols, alias(lit(-1), W)], sub(restricted(OLD)))
    return union_all([plus, minus])


DELTA_RULES: dict[type, Callable[..., exp.Query | None]] = {
    Scan: _delta_scan,
    Constant: _delta_constant,
    Filter: _delta_filter,
    Project: _delta_project,
    Join: _delta_join,
    UnionAll: _delta_union,
    Aggregate: _delta_aggregate,
    Window: _delta_window,
    Generate: _delta_generate,
}


def ranks_all_rows(root: Node) -> bool:
    """The query is a window without PARTITION BY (under projections and filters) over
    its sources' own rows (scans, filters, projections, UNION ALL): any change re-ranks
    every row, so the window's delta rule reads the whole input twice (old and new)
    where recomputing the table reads it once. Below an aggregate or a join it is not:
    recomputing would rescan what the delta rules keep from reading."""
    node = root
    while isinstance(node, Project | Filter):
        node = node.child
    return isinstance(node, Window) and not node.partition_by and _rowwise(node.child)


def _rowwise(node: Node) -> bool:
    return isinstance(node, Scan | Constant | Filter | Project | UnionAll | Generate) and all(
        _rowwise(child) for child in node.children
    )


def keeps_inserts_positive(node: Node) -> bool:
    """True when inserts into the sources can only insert rows here: every operator below
    is a scan, filter, projection, generator, UNION ALL or inner join, whose deltas take their
    weights from the input deltas. Then a refresh over insert-only changes can append
    its delta without consolidating it (nothing can cancel or go negative)."""
    if isinstance(node, Join) and node.kind != "inner":
        return False
    if not isinstance(node, (Scan, Constant, Filter, Project, UnionAll, Join, Generate)):
        return False
    return all(keeps_inserts_positive(child) for child in node.children)
