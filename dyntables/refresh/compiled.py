"""Executing a compiled plan: sources, stateful aggregates, FULL builds, deltas.

The pure rules (:mod:`dyntables.ivm`) say *what* to compute; this module binds them to
a refresh: which snapshot each source is read at, which temp views hold the source
deltas, where each aggregate's state lives, and it runs the statements in the
refresh's WAP-staged session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot import exp

from dyntables.catalog.iceberg import drop_state_tables, load_table
from dyntables.engine.frames import AS_NUMBERS, PRUNABLE_TYPES, literal, number_literal
from dyntables.ivm import aggregate as agg
from dyntables.ivm.rules import NEW, OLD, Materialized, Renderer
from dyntables.ivm.sqlb import W, alias, col, select, sub
from dyntables.plan import map_values
from dyntables.plan.build import Plan
from dyntables.plan.ops import Aggregate, Node, Scan, replace_nodes, scans, walk_post_order
from dyntables.plan.render import spark_sql
from dyntables.refresh.retention import metadata_properties_sql
from dyntables.sql.tokens import TableName, back_quoted

SYSTEM_NAMESPACE = "dyntables_sys"

# key types whose MIN/MAX render as exact literals


def aggregate_nodes(plan: Plan) -> list[tuple[str, Aggregate]]:
    """Stateful nodes in execution order, with stable keys ("agg0", ...)."""
    nodes = [n for n in walk_post_order(plan.root) if isinstance(n, Aggregate)]
    return [(f"agg{i}", n) for i, n in enumerate(nodes)]


def state_keys(plan: Plan) -> set[str]:
    """Every state table a plan needs: one per aggregate, one per COUNT(DISTINCT)."""
    keys: set[str] = set()
    for key, node in aggregate_nodes(plan):
        keys.add(key)
        keys.update(f"{key}_d{j}" for j, _ in agg.distinct_calls(node))
    return keys


def state_columns(plan: Plan) -> dict[str, set[str]]:
    """The columns each aggregate's state table holds, by state key."""
    out: dict[str, set[str]] = {}
    for key, node in aggregate_nodes(plan):
        lay = agg.layout(node)
        out[key] = {*lay.keys, agg.CNT, *(n for _, names in lay.aggs for n in names.values())}
    return out


def table_ref(name: TableName, snapshot: int | None) -> exp.Expr:
    table = exp.to_table(name.sql(), dialect="spark")
    if snapshot is not None:
        table.set(
            "version",
            exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(snapshot)),
        )
    return table


@dataclass
class BoundSources:
    """Binds Scan nodes to snapshots and delta views for one refresh."""

    spark: Any
    old: Mapping[str, int | None]
    new: Mapping[str, int | None]
    delta_views: Mapping[str, str] = field(default_factory=dict)
    _types: dict[int, dict[str, str]] = field(default_factory=dict)
    _rows: dict[str, int | None] = field(default_factory=dict)
    _bounds: dict[tuple[str, str], tuple[exp.Expr, exp.Expr] | None] = field(default_factory=dict)
    renderer: Renderer | None = None
    # EXPLAIN: delta views are names, not views; bounds render as placeholders
    symbolic: bool = False
    # EXPLAIN: a renderer whose aggregates are real relations (their recorded state), to
    # ask Spark for column types where the symbolic one names views that do not exist
    types_renderer: Renderer | None = None

    def scan_rel(self, scan: Scan, version: str) -> exp.Query:
        snapshot = (self.old if version == OLD else self.new)[str(scan.table)]
        items = [
            alias(map_values.source_expr(s), c)
            for s, c in zip(scan.source_columns, scan.out, strict=True)
        ]
        q = select(items, table_ref(scan.table, snapshot))
        return q if snapshot is not None else q.where(exp.false())

    def scan_delta(self, scan: Scan) -> exp.Query | None:
        view = self.delta_views.get(str(scan.table))
        if view is None:
            return None
        items = [alias(col(s), c) for s, c in zip(scan.source_columns, scan.out, strict=True)] + [
            col(W)
        ]
        return select(items, view)

    def source_rows(self, scan: Scan) -> int | None:
        """The source's rows at its new snapshot (metadata only)."""
        key = str(scan.table)
        if key not in self._rows:
            table = load_table(self.spark, scan.table)
            self._rows[key] = table.total_records() if table is not None else None
        return self._rows[key]

    def delta_bounds(self, scan: Scan, column: str) -> tuple[exp.Expr, exp.Expr] | None:
        """MIN and MAX of one column of the source's captured change (one small job over
        the cached change), as literals a scan filter can be pushed down with; None for
        types whose literals are not exact (floating point, timestamps)."""
        view = self.delta_views.get(str(scan.table))
        if view is None or column not in scan.out:
            return None
        source_column = scan.source_columns[scan.out.index(column)]
        if self.symbolic:
            low, high = (
                exp.Placeholder(this=f"{view}_{source_column}_{end}") for end in ("min", "max")
            )
            return low, high
        key = (view, source_column)
        if key not in self._bounds:
            df = self.spark.table(view).selectExpr(
                f"min({back_quoted(source_column)}) AS lo",
                f"max({back_quoted(source_column)}) AS hi",
            )
            type_sql = df.schema.fields[0].dataType.simpleString()
            if not PRUNABLE_TYPES.match(type_sql):
                self._bounds[key] = None
            elif type_sql == "date":
                # as day numbers: Python's dates stop at year 9999, Spark's go on
                to_number = AS_NUMBERS["date"][0]
                (row,) = df.selectExpr(f"{to_number}(lo) AS lo", f"{to_number}(hi) AS hi").collect()
                self._bounds[key] = (
                    number_literal(row["lo"], "date"),
                    number_literal(row["hi"], "date"),
                )
            else:
                (row,) = df.collect()
                self._bounds[key] = (literal(row["lo"], type_sql), literal(row["hi"], type_sql))
        found = self._bounds[key]
        return None if found is None else (found[0].copy(), found[1].copy())

    def column_types(self, node: Node) -> Mapping[str, str]:
        if id(node) not in self._types:
            renderer = self.types_renderer or self.renderer
            assert renderer is not None
            schema = self.spark.sql(spark_sql(renderer.rel(node, NEW))).schema
            self._types[id(node)] = {f.name: f.dataType.simpleString() for f in schema.fields}
        return self._types[id(node)]


def avg_types(spark: Any, renderer: Renderer, node: Aggregate) -> dict[str, str]:
    """Spark's result type of each AVG (exact DECIMAL averages depend on it)."""
    calls = [c for c in node.aggs if c.func == "avg"]
    if not calls:
        return {}
    # an AVG always has an argument
    items = [alias(exp.Avg(this=c.arg.copy()), c.column) for c in calls if c.arg is not None]
    q = select(items, sub(renderer.rel(node.child, NEW)))
    return {f.name: f.dataType.simpleString() for f in spark.sql(spark_sql(q)).schema.fields}


def avg_arg_types(spark: Any, renderer: Renderer, node: Aggregate) -> dict[str, str]:
    """The type of each AVG call's argument, by column (analysis only, no job)."""
    calls = [c for c in node.aggs if c.func == "avg" and c.arg is not None]
    if not calls:
        return {}
    items = [alias(exp.Max(this=c.arg.copy()), c.column) for c in calls if c.arg is not None]
    q = select(items, sub(renderer.rel(node.child, NEW)))
    return {f.name: f.dataType.simpleString() for f in spark.sql(spark_sql(q)).schema.fields}


def integral_avgs(spark: Any, renderer: Renderer, node: Aggregate) -> frozenset[str]:
    """The AVG calls (by column) over integers: their running sum is kept exact and wide
    (aggregate.EXACT_AVG_SUM), where Spark's AVG sums them in DOUBLE."""
    integral = ("tinyint", "smallint", "int", "bigint")
    types = avg_arg_types(spark, renderer, node)
    return frozenset(name for name, type_sql in types.items() if type_sql in integral)


def with_exact_averages(spark: Any, plan: Plan) -> Plan:
    """``plan`` with each AVG that its sum and count cannot give exactly (a DECIMAL
    argument outside aggregate.exact_average) recomputed for the groups a change
    touches: Spark's types decide, which the pure builder does not know."""
    nodes = [n for _, n in aggregate_nodes(plan) if any(c.func == "avg" for c in n.aggs)]
    if not nodes:
        return plan
    current = {str(s.table): None for s in scans(plan.root)}
    sources = BoundSources(spark, old=current, new=current)
    renderer = Renderer(sources)
    sources.renderer = renderer
    swap: dict[int, Node] = {}
    for node in nodes:
        try:
            types = avg_arg_types(spark, renderer, node)
        except Exception:  # noqa: BLE001 - a source gone: the refresh says so; finalizing
            return plan  # an AVG it could not type refuses, it never rounds wrong
        rebuilt = agg.recompute_inexact_averages(node, types)
        if rebuilt is not node:
            swap[id(node)] = rebuilt
    if not swap:
        return plan
    return replace(plan, root=replace_nodes(plan.root, swap))


def state_table_name(catalog: str, dt_id: str, key: str, generation: str) -> TableName:
    return TableName((catalog, SYSTEM_NAMESPACE, f"st_{dt_id[:12]}_{key}_{generation[-12:]}"))


def output_sql(plan: Plan, renderer: Renderer, columns: list[str], version: str = NEW) -> str:
    """The plan's rows in the dynamic table's column order and names, a MAP it carries
    as its entries written as the MAP."""
    items = [
        alias(
            exp.Anonymous(this="map_from_entries", expressions=[col(c)])
            if c in plan.entries
            else col(c),
            name,
        )
        for c, name in zip(plan.root.columns, columns, strict=True)
    ]
    return spark_sql(select(items, sub(renderer.rel(plan.root, version))))


def entries_columns(plan: Plan, columns: list[str]) -> frozenset[str]:
    """The table's columns whose delta carries a MAP as its entries (see apply.py)."""
    return frozenset(
        name for c, name in zip(plan.root.columns, columns, strict=True) if c in plan.entries
    )


def delta_output_sql(plan: Plan, renderer: Renderer, columns: list[str]) -> str | None:
    d = renderer.delta(plan.root)
    if d is None:
        return None
    items = [alias(col(c), name) for c, name in zip(plan.root.columns, columns, strict=True)] + [
        col(W)
    ]
    return spark_sql(select(items, sub(d)))


def full_build(
    spark: Any,
    plan: Plan,
    catalog: str,
    dt_id: str,
    generation: str,
    new: Mapping[str, int | None],
    columns: list[str],
) -> tuple[str, dict[str, dict[str, object]]]:
    """Build fresh state tables for every aggregate (CTAS) and return the SQL of the
    table's contents computed *from that state*, so later deltas derived from the state
    match the stored rows exactly (including DOUBLE sums)."""
    sources = BoundSources(spark, old=new, new=new)
    renderer = Renderer(sources)
    sources.renderer = renderer
    states: dict[str, dict[str, object]] = {}
    try:
        if aggregate_nodes(plan):  # a catalog call the plans without state can skip
            spark.sql(
                f"CREATE NAMESPACE IF NOT EXISTS {TableName((catalog, SYSTEM_NAMESPACE)).sql()}"
            )
        for key, node in aggregate_nodes(plan):
            name = state_table_name(catalog, dt_id, key, generation)
            build = spark_sql(
                agg.build_sql(
                    node, renderer.rel(node.child, NEW), integral_avgs(spark, renderer, node)
                )
            )
            # named before it is built: a failure half-way leaves it to be dropped too
            states[key] = {"table": str(name), "snapshot": None}
            # no WAP on state: its writes commit directly (see incremental._StateWrite)
            spark.sql(
                f"CREATE TABLE {name.sql()} USING iceberg TBLPROPERTIES ('dyntables.state_of'='{dt_id}', {metadata_properties_sql()}) AS {build}"
            )
            table = load_table(spark, name)
            snapshot = table.current_snapshot_id() if table else None
            states[key] = {"table": str(name), "snapshot": snapshot}
            for j, call in agg.distinct_calls(node):
                dname = state_table_name(catalog, dt_id, f"{key}_d{j}", generation)
                dbuild = spark_sql(
                    agg.build_distinct_sql(node, call, renderer.rel(node.child, NEW))
                )
                states[f"{key}_d{j}"] = {"table": str(dname), "snapshot": None}
                spark.sql(
                    f"CREATE TABLE {dname.sql()} USING iceberg TBLPROPERTIES ('dyntables.state_of'='{dt_id}', {metadata_properties_sql()}) AS {dbuild}"
                )
                dtable = load_table(spark, dname)
                states[f"{key}_d{j}"] = {
                    "table": str(dname),
                    "snapshot": dtable.current_snapshot_id() if dtable else None,
                }
            finalized = agg.finalized(
                node, select(["*"], table_ref(name, snapshot)), avg_types(spark, renderer, node)
            )
            renderer.materialized[id(node)] = Materialized(finalized, finalized.copy(), None)
        return output_sql(plan, renderer, columns), states
    except Exception:  # the tables built so far belong to no refresh
        drop_state_tables(spark, [str(v["table"]) for v in states.values()])
        raise
