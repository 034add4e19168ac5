"""EXPLAIN DYNAMIC TABLE: the decision, the rule for each operator, and the delta SQL.

Source deltas and aggregate state appear under symbolic view names (``delta(orders)``,
``agg0.delta``) so the SQL reads like the plan a refresh will run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dyntables.catalog.definition import DynamicTableDef, RefreshState, snapshot_of, table_name_of
from dyntables.catalog.iceberg import load_table
from dyntables.ivm import aggregate as agg
from dyntables.ivm.rules import Materialized, Renderer, keeps_inserts_positive
from dyntables.ivm.sqlb import select
from dyntables.plan.build import Plan
from dyntables.plan.calls import recomputed_name
from dyntables.plan.ops import RECOMPUTED, AggCall, Aggregate, Join, Node, Window, walk_post_order
from dyntables.plan.render import spark_sql
from dyntables.refresh.apply import REWRITE_MAX_ROWS, SINGLE_JOB_MAX_ROWS
from dyntables.refresh.compiled import (
    BoundSources,
    aggregate_nodes,
    avg_types,
    delta_output_sql,
    entries_columns,
    output_sql,
    table_ref,
)
from dyntables.refresh.day import DAY_CHANGED, today
from dyntables.refresh.incremental import rebuilds_whole, under_rowwise_root

if TYPE_CHECKING:
    from dyntables.refresh.planner import Planner

RULES = {
    "Scan": "read the source's changes (appended files / changed files / snapshot diff)",
    "Constant": "rows of literals, the same at every snapshot: no change",
    "Filter": "filter the delta rows",
    "Project": "project the delta rows, keeping weights",
    "UnionAll": "union of the inputs' deltas",
    "Generate": "the generator applied to the delta rows, each generated row with its row's weight",
    "Window": (
        "recompute the partitions whose keys appear in the delta (a large input read"
        " only within the change's range of a partition key)"
    ),
}


def _rule(node: Node, rebuilt: frozenset[int] = frozenset()) -> str:
    if isinstance(node, Join):
        if node.kind == "inner":
            return "dL JOIN R_old + L_new JOIN dR"
        if node.kind in ("left", "right", "semi", "anti"):
            kept, other = ("R", "L") if node.kind == "right" else ("L", "R")
            how = {"left": "LEFT JOIN", "right": "RIGHT JOIN"}.get(node.kind, f"{node.kind} join")
            if node.kind in ("semi", "anti") and node.left_keys and node.residual is None:
                return (
                    f"{how}: dL filtered by R_new, plus L_old rows at the keys whose match"
                    " R's delta flipped"
                )
            where = (
                f"at the keys {other}'s delta touches"
                if node.left_keys
                else f"(all of them: no equality to key on) when {other} changed"
            )
            return (
                f"d{kept} {how} {other}_new + {kept}_old rows {where}, matched again with"
                f" {other}_new (+) and {other}_old (-)"
            )
        if node.residual is not None:  # a full join
            return "inner delta + NULL-padded rows of the keys either delta touches, matched again (old and new)"
        return "inner delta + NULL-padded rows whose key gained/lost its match"
    if isinstance(node, Aggregate):
        kinds = ", ".join(sorted({_agg_name(c) for c in node.aggs})) or "DISTINCT"
        if id(node) in rebuilt:
            return (
                f"new per-group state [{kinds}] = old state + change summed by group;"
                " the table is rewritten from it"
            )
        extra = (
            " (MIN/MAX recomputed only for groups whose extreme is deleted)"
            if any(c.func in ("min", "max") for c in node.aggs)
            else ""
        )
        recomputed = sorted({_agg_name(c) for c in node.aggs if c.func == RECOMPUTED})
        if recomputed:
            extra += (
                f" ({', '.join(recomputed)} recomputed for every touched group: no running"
                " state undoes a delete)"
            )
        return f"merge per-group state [{kinds}]; emit -old/+new rows of touched groups{extra}"
    if isinstance(node, Window):
        return (
            RULES["Window"]
            if node.partition_by
            else "no PARTITION BY: recompute the single partition on any change"
        )
    return RULES.get(type(node).__name__, "")


def _delta_view(source: str) -> str:
    """The name EXPLAIN shows for a source's change: a plain word, whatever the
    table's name is (``or-ders`` -> ``delta_or_ders``)."""
    return "delta_" + re.sub(r"\W", "_", source.split(".")[-1])


def _agg_name(call: AggCall) -> str:
    """COUNT, SUM, ... for the rules with running state; a recomputed call's own name."""
    if call.func != RECOMPUTED or call.arg is None:
        return call.func.upper()
    return recomputed_name(call.arg)  # as Spark reads it: BOOL_AND


def _tree(
    node: Node, depth: int = 0, rebuilt: frozenset[int] = frozenset()
) -> list[tuple[str, str]]:
    """The operator tree, one line each with its delta rule (``rebuilt``: the ids of the
    aggregates whose table is rewritten from their new state, a different rule)."""
    lines = [("  " * depth + node.label, _rule(node, rebuilt))]
    for child in node.children:
        lines.extend(_tree(child, depth + 1, rebuilt))
    return lines


def explain(planner: Planner, dt: DynamicTableDef) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [
        ("dynamic table", str(dt.name)),
        ("requested mode", dt.refresh_mode),
    ]
    decided = planner.sources_now(dt)
    if decided is not None:
        return [*rows, ("decision", decided[0]), ("reason", decided[1])]
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
    decision, reason_text = planner.describe(dt, compiled)
    rows += [("decision", decision), ("reason", reason_text)]
    operators = len(rows)
    rows += [("operator", f"{label}  --  {rule}") for label, rule in _tree(plan.root)]
    if decision == "FULL":  # AUTO chose to recompute: no delta will run
        return rows
    if dt.refresh_mode == "AUTO":
        rows.append(("auto", _auto_rule(plan)))
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
        delta_views={name: _delta_view(name) for name in current},
        symbolic=True,
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
        sources.types_renderer = _typing_renderer(spark, plan, sources, state)
        for src, version in sorted(state.sources.items()):
            rows.append(
                (
                    "source",
                    f"{src}: last refresh read snapshot {version.snapshot}, now {current.get(src)}",
                )
            )
    day = today(spark, dt)
    if day is not None:
        rows.append(
            (
                "current date",
                f"read as DATE '{day}' by every statement of a refresh today; a refresh on "
                f"another day recomputes ({DAY_CHANGED})",
            )
        )
    table_rows = table.total_records() if table else None
    rebuilt: frozenset[int] = frozenset()
    if state is not None:
        stages, rebuilt = _state_stages(spark, plan, renderer, state, table_rows)
        rows += stages
    columns = compiled.columns or list(plan.output_names)
    if rebuilt:
        tree = _tree(plan.root, rebuilt=rebuilt)
        rows[operators : operators + len(tree)] = [
            ("operator", f"{label}  --  {rule}") for label, rule in tree
        ]
        rows.append(("table sql", output_sql(plan, renderer, columns)))
        rows.append(
            (
                "apply",
                f"small table ({table_rows} rows): rewritten from the aggregate's new state"
                " (its old state plus the change summed by group, one cached row per group),"
                " the state written beside it; the rows inserted and deleted are counted"
                " group by group while the table is written",
            )
        )
        return rows
    sql = delta_output_sql(plan, renderer, columns)
    rows.append(("delta sql", sql or "(no source can change)"))
    partitioned = bool(table.partition_fields()) if table is not None else False
    rows.append(("apply", _apply_rule(plan, table_rows, partitioned)))
    maps = [c for c in columns if c in entries_columns(plan, columns)]
    if maps:
        rows.append(
            (
                "map columns",
                f"{', '.join(maps)}: carried by the delta as their entries (map_entries, "
                "which Spark can group), the table's rows matched by theirs, written back "
                "with map_from_entries",
            )
        )
    return rows


def _typing_renderer(
    spark: Any, plan: Plan, sources: BoundSources, state: RefreshState
) -> Renderer | None:
    """A renderer whose aggregates are their recorded state, finalized: the types of
    an outer join's NULL-padded columns above an aggregate come from it (the EXPLAIN
    renderer's ``aggN_new`` views do not exist)."""
    typing = Renderer(sources)
    for key, node in aggregate_nodes(plan):
        info = state.state_tables.get(key)
        if info is None:
            return None
        recorded = select(["*"], table_ref(table_name_of(info), snapshot_of(info)))
        value = agg.finalized(node, recorded, avg_types(spark, typing, node))
        typing.materialized[id(node)] = Materialized(value, value.copy(), None)
    return typing


def _state_stages(
    spark: Any, plan: Plan, renderer: Renderer, state: RefreshState, table_rows: int | None
) -> tuple[list[tuple[str, str]], frozenset[int]]:
    """Each aggregate's stages: the old and new state of the groups its input's delta
    touches (``aggN_change``), and the -old/+new rows it emits from them; or, for an
    aggregate the table is rewritten from, its new state (``aggN_new``). Also the ids of
    the aggregates the table is rewritten from."""
    rows: list[tuple[str, str]] = []
    rebuilt: set[int] = set()
    for key, node in aggregate_nodes(plan):
        info = state.state_tables.get(key)
        child_delta = renderer.delta(node.child)
        if info is None or child_delta is None:
            continue
        name = table_name_of(info)
        old = select(["*"], table_ref(name, snapshot_of(info)))
        try:
            fields = spark.table(name.sql()).schema.fields
        except Exception:  # a dropped state table: the next refresh rebuilds (FULL)
            rows.append((f"{key} state", f"{name} is missing: the next refresh is FULL"))
            continue
        types = {f.name: f.dataType.simpleString() for f in fields}
        if rebuilds_whole(plan, node, types, table_rows):
            rows.append(
                (f"{key} new state", spark_sql(agg.rebuild_sql(node, child_delta, old, types)))
            )
            rebuilt.add(id(node))
            continue
        distinct = {j: f"{key}_d{j}_delta" for j, _ in agg.distinct_calls(node)}
        change = agg.change_sql(node, child_delta, old, types, distinct)
        rows.append((f"{key} change", spark_sql(change)))
        rows.append((f"{key} delta", spark_sql(agg.output_delta_sql(node, f"{key}_change", {}))))
    return rows, frozenset(rebuilt)


def _auto_rule(plan: Plan) -> str:
    """When AUTO will recompute instead of running the delta (see planner.py)."""
    from dyntables.refresh.planner import (
        CHANGE_TOO_LARGE,
        DELTA_READS_TOO_MUCH,
        FULL_MIN_ROWS,
        FULL_THRESHOLD,
    )

    share = f"{FULL_THRESHOLD:.0%}"
    text = (
        f"FULL instead when the change is at least {share} of sources of {FULL_MIN_ROWS:,}+"
        f" rows ({CHANGE_TOO_LARGE})"
    )
    nodes = walk_post_order(plan.root)
    readers = (
        ("a join's delta", any(isinstance(n, Join) for n in nodes)),
        ("a window's delta", any(isinstance(n, Window) and n.partition_by for n in nodes)),
        (
            "an aggregate's recompute of its touched groups",
            any(
                isinstance(n, Aggregate) and any(c.func == RECOMPUTED for c in n.aggs)
                for n in nodes
            ),
        ),
    )
    what = " or ".join(w for w, present in readers if present)
    if what:
        text += (
            f", or when {what} would read at least {share} of the rows a recompute"
            " reads and writes: its change's keys spread over a large input"
            f" ({DELTA_READS_TOO_MUCH}, weighed from Iceberg's file statistics before each refresh)"
        )
    return text


def _apply_rule(plan: Plan, table_rows: int | None, partitioned: bool = False) -> str:
    """How the delta reaches the table (see dyntables/refresh/apply.py)."""
    parts = []
    if keeps_inserts_positive(plan.root):
        parts.append("appended in one job when every source only gained rows; otherwise")
    if table_rows is not None and table_rows <= SINGLE_JOB_MAX_ROWS:
        parts.append(
            f"small table ({table_rows} rows): rewritten with the delta in one job that"
            " counts the rows inserted and deleted"
        )
    else:
        large = (
            "rewritten"
            if table_rows is not None and table_rows <= REWRITE_MAX_ROWS
            else "MERGEd (only the table's rows within the leaving values' column ranges)"
        )
        if partitioned and large.startswith("MERGEd"):
            large = (
                "the partitions holding the leaving values are overwritten when they are few"
                " and hold no more data files than values leave; otherwise " + large
            )
        parts.append(f"consolidated and counted; appended when it only inserts, else {large}")
    if under_rowwise_root(plan) is not None:
        parts.append("(the aggregate's state is written beside the table)")
    return " ".join(parts)
