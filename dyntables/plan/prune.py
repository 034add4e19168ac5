"""Scans read only the columns a plan uses.

A CTE's or derived table's ``SELECT *`` passes on every column of its sources, and a
plan built clause by clause scans them all; the change capture then reads, and a
source's history must provide, columns nothing reads (one added by ALTER TABLE later
is missing at older snapshots). Dropping them changes no row's weight: projection is
linear over Z-sets.

Pure sqlglot: no Spark here.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from sqlglot import exp
from sqlglot.errors import ParseError

from dyntables.plan.map_values import groupable
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import (
    Aggregate,
    Constant,
    Filter,
    Generate,
    Join,
    Node,
    Project,
    Scan,
    Schema,
    UnionAll,
    Window,
    map_nodes,
    walk_post_order,
)


def _referenced(root: Node) -> set[str]:
    """Internal column names some operator reads: in an expression, positionally (UNION
    inputs), or as the plan's output."""
    used = set(root.columns)
    exprs: list[exp.Expr] = []
    for n in walk_post_order(root):
        if isinstance(n, Filter):
            exprs.append(n.predicate)
        elif isinstance(n, Project):
            exprs.extend(n.exprs)
        elif isinstance(n, Join):
            exprs.extend(n.left_keys + n.right_keys)
            if n.residual is not None:
                exprs.append(n.residual)
        elif isinstance(n, Aggregate):
            exprs.extend(n.keys)
            exprs.extend(a.arg for a in n.aggs if a.arg is not None)
        elif isinstance(n, Window):
            exprs.extend(n.partition_by + n.funcs)
        elif isinstance(n, Generate):
            exprs.append(n.call)
        elif isinstance(n, UnionAll):
            for child in n.inputs:
                used.update(child.columns)
    for e in exprs:
        used.update(c.name for c in e.find_all(exp.Column))
    return used


def drop_unread_columns(root: Node, schema: Schema) -> Node:
    """``root`` without the columns projections pass on as they are that nothing reads
    (a CTE's or derived table's ``SELECT *``; a MAP of which only what is read is now
    passed on beside it), from the top down: the scans then read only what the query
    uses. Dropping a column changes no row's weight (projection is linear)."""
    used = _referenced(root)  # the plan's output and a UNION's inputs among them
    drop = functools.partial(_without_unread, schema=schema)
    while True:
        rebuilt = map_nodes(root, functools.partial(drop, used=used))
        now = _referenced(rebuilt)
        if now == used:  # nothing more became unread
            return rebuilt
        root, used = rebuilt, now


def _without_unread(n: Node, used: set[str], schema: Schema) -> Node:
    """Projection ``n`` without the bare columns it passes on that are not ``used``.
    When none is (``SELECT 1 FROM (SELECT * FROM t) x``), one still counts the rows:
    the first that is no MAP, which Spark could not group."""
    if not isinstance(n, Project):
        return n
    keep: list[tuple[exp.Expr, str]] = [
        (e, o)
        for e, o in zip(n.exprs, n.out, strict=True)
        if o in used or not isinstance(e, exp.Column) or e.table
    ]
    if not keep:
        keep = [
            (e, o)
            for e, o in zip(n.exprs, n.out, strict=True)
            if groupable(_typed(n.child, e.name, schema))
        ][:1]
    if not keep or len(keep) == len(n.exprs):
        return n
    return replace(n, exprs=tuple(e for e, _ in keep), out=tuple(o for _, o in keep))


def _typed(node: Node, column: str, schema: Schema) -> str:
    """The type of ``column`` of ``node`` as Spark writes it, where it is known (see
    defining); "" where not."""
    defined = defining(node, column, schema)
    t = None if defined is None else defined.type
    return t.sql("spark") if isinstance(t, exp.DataType) else ""


def prune_scans(root: Node, schema: Schema) -> Node:
    """Scans read only the columns the query uses.

    Cheaper change capture, and exactly what a source's history must provide: a column
    added to a source later (ALTER TABLE ... ADD COLUMN) is not read at the older
    snapshot whose schema lacks it. Consolidating a change by a subset of its columns is
    still exact (projection is linear over Z-sets). A column Spark cannot group by (a
    MAP) cannot be consolidated or compared at all: such a query refreshes FULL.
    """
    used = _referenced(root)

    def prune(n: Node) -> Node:
        if isinstance(n, Scan):
            types = dict(schema.get(n.table, []))
            keep = [(s, o) for s, o in zip(n.source_columns, n.out, strict=True) if o in used]
            for s, _ in keep:
                if not groupable(types.get(s, "")):
                    raise NotIncremental(
                        "MAP_COLUMN",
                        "Scan",
                        f"{n.table}.{s} is a {types[s]}: Spark cannot group or compare it",
                    )
            if not keep:  # e.g. COUNT(*): one column still counts the rows
                keep = [
                    (s, o)
                    for s, o in zip(n.source_columns, n.out, strict=True)
                    if groupable(types.get(s, ""))
                ][:1]
                if not keep:
                    raise NotIncremental(
                        "MAP_COLUMN", "Scan", f"{n.table} has no column Spark can group by"
                    )
            return Scan(n.table, tuple(s for s, _ in keep), tuple(o for _, o in keep))
        if isinstance(n, (Filter, Project, Aggregate, Window, Generate)):
            return replace(n, child=prune(n.child))
        if isinstance(n, Join):
            return replace(n, left=prune(n.left), right=prune(n.right))
        if isinstance(n, UnionAll):
            return replace(n, inputs=tuple(prune(c) for c in n.inputs))
        if isinstance(n, Constant):
            return n
        raise AssertionError(f"unknown operator {type(n).__name__}")

    return prune(root)


def defining(node: Node, column: str, schema: Schema) -> exp.Expr | None:
    """The expression that computes ``column`` of ``node`` (typed by sqlglot's annotation
    where it could tell), following bare column references down; a scan's column typed
    as its source's; None at an aggregate or a generated column."""
    while True:
        if isinstance(node, Scan):
            if column not in node.out:
                return None
            source = node.source_columns[node.out.index(column)]
            c = exp.column(source)
            try:
                c.type = exp.DataType.build(
                    dict(schema.get(node.table, []))[source], dialect="spark"
                )
            except (KeyError, ParseError, ValueError):
                c.type = None  # a type sqlglot cannot read: treated as not a MAP
            return c
        if isinstance(node, Project):
            if column not in node.out:
                return None
            e = node.exprs[node.out.index(column)]
            if not isinstance(e, exp.Column) or e.table:
                return e
            node, column = node.child, e.name
        elif isinstance(node, UnionAll):
            if column not in node.out:
                return None
            first = node.inputs[0]
            column = first.columns[node.out.index(column)]
            node = first
        elif isinstance(node, Filter | Window | Join | Generate):
            below = [c for c in node.children if column in c.columns]
            if not below:
                return None
            node = below[0]
        else:
            return None
