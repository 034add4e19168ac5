"""EXPLAIN DYNAMIC TABLE: the decision, the rule for each operator, and the delta SQL.

Source deltas and aggregate state appear under symbolic view names (``delta(orders)``,
``agg0.delta``) so the SQL reads like the plan a refresh will run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from dyntables.catalog.definition import DynamicTableDef, RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.ivm.rules import Materialized, Renderer
from dyntables.ivm.sqlb import select
from dyntables.plan.ops import Aggregate, Join, Node, Window
from dyntables.refresh.compiled import BoundSources, aggregate_nodes, delta_output_sql

if TYPE_CHECKING:
    from dyntables.refresh.planner import Planner

RULES = {
    "Scan": "read the source's changes (append scan / changelog / snapshot diff)",
    "Filter": "filter the delta rows",
    "Project": "project the delta rows, keeping weights",
    "UnionAll": "union of the inputs' deltas",
    "Window": "recompute the partitions whose keys appear in the delta",
}


def _rule(node: Node) -> str:
    if isinstance(node, Join):
        if node.kind == "inner":
            return "dL JOIN R_old + L_new JOIN dR"
        if node.kind in ("semi", "anti"):
            return f"{node.kind} join: dL filtered by R_new, plus L_old rows whose key gained/lost its match"
        return "inner delta + NULL-padded rows whose key gained/lost its match"
    if isinstance(node, Aggregate):
        kinds = ", ".join(sorted({c.func.upper() for c in node.aggs})) or "DISTINCT"
        extra = (
            " (MIN/MAX recomputed only for groups whose extreme is deleted)"
            if any(c.func in ("min", "max") for c in node.aggs)
            else ""
        )
        return f"merge per-group state [{kinds}]; emit -old/+new rows of touched groups{extra}"
    if isinstance(node, Window):
        return (
            RULES["Window"]
            if node.partition_by
            else "no PARTITION BY: recompute the single partition on any change"
        )
    return RULES.get(type(node).__name__, "")


def _tree(node: Node, depth: int = 0) -> list[tuple[str, str]]:
    lines = [("  " * depth + node.label, _rule(node))]
    for child in node.children:
        lines.extend(_tree(child, depth + 1))
    return lines


def explain(planner: Planner, dt: DynamicTableDef) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [
        ("dynamic table", str(dt.name)),
        ("requested mode", dt.refresh_mode),
    ]
    if dt.refresh_mode == "FULL":
        rows += [
            ("decision", "FULL"),
            ("reason", "REFRESH_MODE_FULL: created with REFRESH_MODE = FULL"),
        ]
        return rows
    compiled = planner.compile(dt)
    if compiled.plan is None:
        reason = compiled.reason
        assert reason is not None
        rows += [
            ("decision", "FULL"),
            ("reason", f"{reason.code} at {reason.operator}: {reason.detail}"),
        ]
        return rows
    plan = compiled.plan
    rows += [("decision", "INCREMENTAL"), ("reason", "every operator has a delta rule")]
    rows += [("operator", f"{label}  --  {rule}") for label, rule in _tree(plan.root)]
    spark = planner.registry.spark
    table = load_table(spark, dt.name)
    state = RefreshState.from_properties(table.properties()) if table is not None else None
    current = {}
    for source in dt.sources:
        t = load_table(spark, source)
        current[str(source)] = t.current_snapshot_id() if t is not None else None
    recorded = {k: v.snapshot for k, v in state.sources.items()} if state else current
    sources = BoundSources(
        spark,
        old=recorded,
        new=current,
        delta_views={name: f"delta_{name.split('.')[-1]}" for name in current},
    )
    renderer = Renderer(sources)
    sources.renderer = renderer
    for key, node in aggregate_nodes(plan):
        view = select(["*"], exp.to_table(f"{key}_old"))
        renderer.materialized[id(node)] = Materialized(
            view,
            select(["*"], exp.to_table(f"{key}_new")),
            select(["*"], exp.to_table(f"{key}_delta")),
        )
    if state is not None:
        for src, version in sorted(state.sources.items()):
            rows.append(
                (
                    "source",
                    f"{src}: last refresh read snapshot {version.snapshot}, now {current.get(src)}",
                )
            )
    sql = delta_output_sql(plan, renderer, compiled.columns or list(plan.output_names))
    rows.append(("delta sql", sql or "(no source can change)"))
    return rows
