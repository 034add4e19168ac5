"""INCREMENTAL refresh: read the source deltas, push them through the compiled plan,
update aggregate state, and apply the resulting delta to the table. The table's write
is WAP-staged and the runner publishes it (the commit point); aggregate state commits
directly, and a refresh that fails after that is undone by the next one, which rolls
the state back to the snapshot the table recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dyntables.catalog.definition import snapshot_of, table_name_of
from dyntables.catalog.iceberg import load_table
from dyntables.engine.checkpoint import cached_alone, forget_view, frozen, release
from dyntables.ivm import aggregate as agg
from dyntables.ivm.cost import reads_large_input, recomputes_large_input
from dyntables.ivm.rules import (
    NEW,
    Materialized,
    Renderer,
    keeps_inserts_positive,
    rel_within_change,
)
from dyntables.ivm.sqlb import W, alias, raise_error, select, sub
from dyntables.plan.build import Plan
from dyntables.plan.ops import Aggregate, Filter, Project
from dyntables.plan.render import spark_sql
from dyntables.refresh import faults
from dyntables.refresh.apply import (
    DYNTABLES_PREFIX,
    REWRITE_MAX_ROWS,
    SINGLE_JOB_MAX_ROWS,
    Applied,
    Partitioning,
    append_delta,
    apply_delta,
    observed,
)
from dyntables.refresh.changes import (
    APPEND,
    INITIAL,
    NONE,
    Capture,
    StagedScans,
    columns_moved,
    read_changes,
)
from dyntables.refresh.compiled import (
    BoundSources,
    aggregate_nodes,
    avg_types,
    delta_output_sql,
    entries_columns,
    output_sql,
    table_ref,
)
from dyntables.refresh.estimate import ReadEstimate, ReadWeigher
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from dyntables.catalog.definition import SourceVersion
    from dyntables.refresh.runner import RefreshContext, WriteResult


class SchemaMovedError(Exception):
    """A source's columns changed after the refresh pinned its snapshot, before its
    changes were read: they were read under the new schema, not the pinned one."""


def _check_unmoved(
    spark: Any,
    captures: Mapping[str, Capture],
    pinned: Mapping[str, SourceVersion],
    source_columns: Mapping[str, list[str]],
) -> None:
    """Raise SchemaMovedError for the first source read whose columns are now other than
    at its pinned snapshot. Asked once the changes' DataFrames are bound (each binds the
    schema current at its load): a change after that cannot reach them, one before it
    shows here."""
    for source, capture in sorted(captures.items()):
        snapshot = pinned[source].snapshot
        if capture.method == NONE or snapshot is None:
            continue
        table = load_table(spark, TableName(tuple(source.split("."))))
        if table is None or columns_moved(table, snapshot, source_columns[source]):
            raise SchemaMovedError(f"the columns of {source} changed during the refresh")


class StateMissingError(Exception):
    """An aggregate's state table is gone; the refresh must rebuild (FULL)."""


def _short(name: str) -> str:
    return name.split(".")[-1]


def incremental_refresh(
    ctx: RefreshContext,
    plan: Plan,
    captures: Mapping[str, Capture],
    columns: list[str],
    source_columns: Mapping[str, list[str]],
    recompute_if: Callable[[ReadEstimate], bool] | None = None,
) -> WriteResult:
    """``recompute_if`` (AUTO): given the delta's estimated reads, whether to recompute
    instead; asked before anything is written, and answered with RecomputeCheaper."""

    from dyntables.refresh.runner import WriteResult

    spark = ctx.spark
    previous = ctx.previous
    assert previous is not None
    cached: list[Any] = []
    checkpoints: list[Any] = []
    views: list[str] = []
    prefix = f"_dt_{ctx.job_id[-12:]}"

    def keep(df: Any, exactly: bool) -> Any:
        """``df`` cached, or checkpointed where a recomputation could round otherwise."""
        if exactly:
            df = frozen(df)
            checkpoints.append(df)
            return df
        stored, df = cached_alone(df, f"{prefix}_{len(cached)}")
        cached.append(stored)
        return df

    task_sets = StagedScans(spark, ctx.job_id)
    rewrite: _Rewrite | None = None  # the table rewritten from an aggregate's new state
    try:
        states = {k: dict(v) for k, v in previous.state_tables.items()}
        _recover_state(spark, states)
        delta_views: dict[str, str] = {}
        try:
            for i, (source, capture) in enumerate(sorted(captures.items())):
                ctx.stats[f"capture.{_short(source)}"] = capture.method or "none"
                if capture.method == NONE:
                    ctx.stats[f"rows_read.{_short(source)}"] = 0
                    continue
                source_name = TableName(tuple(source.split(".")))
                df = read_changes(
                    spark,
                    source_name.sql(),
                    source_columns[source],
                    capture,
                    previous.sources[source],
                    ctx.pinned[source],
                    task_sets,
                    load_table(spark, source_name) if capture.diff else None,
                )
                if capture.method not in (APPEND, INITIAL):
                    # a consolidated change (a shuffle) is computed once, however often the
                    # delta rules read it; new files are read again instead: caching them
                    # cost more than a second scan (a join layer with 100k appended rows:
                    # 2.8 s cached, 1.05 s not)
                    df = keep(df, exactly=False)
                view = f"{prefix}_src{i}"
                df.createOrReplaceTempView(view)
                views.append(view)
                delta_views[source] = view
                # what the capture reads, from snapshot summaries: a count would be a job
                ctx.stats[f"rows_read.{_short(source)}"] = capture.read_rows
        except Exception:  # a column renamed after the pin: Spark cannot resolve it
            _check_unmoved(spark, captures, ctx.pinned, source_columns)
            raise
        _check_unmoved(spark, captures, ctx.pinned, source_columns)
        faults.reach("after_read_changes")
        sources = BoundSources(
            spark,
            old={k: v.snapshot for k, v in previous.sources.items()},
            new={k: v.snapshot for k, v in ctx.pinned.items()},
            delta_views=delta_views,
        )

        def share(delta: exp.Query) -> exp.Query:
            """A join's delta two rules above read: computed once, cached."""
            view = f"{prefix}_shared{len(views)}"
            keep(spark.sql(spark_sql(delta)), exactly=False).createOrReplaceTempView(view)
            views.append(view)
            return select(["*"], exp.to_table(view))

        renderer = Renderer(sources, share=share)
        sources.renderer = renderer
        if recompute_if is not None:
            _weigh_before_writing(ctx, plan, captures, sources, states, recompute_if)
        publish_first: list[tuple[TableName, int]] = []
        writes: list[_StateWrite] = []
        deferred: _StateWrite | None = None
        last_write_free = under_rowwise_root(plan)
        for key, node in aggregate_nodes(plan):
            info = states[key]
            name = table_name_of(info)
            before = snapshot_of(info)
            state_old = select(["*"], table_ref(name, before))
            averages = avg_types(spark, renderer, node)
            old_rel = agg.finalized(node, state_old, averages)
            child_delta = renderer.delta(node.child)
            if child_delta is None:
                renderer.materialized[id(node)] = Materialized(old_rel, old_rel.copy(), None)
                continue
            state_types = {
                f.name: f.dataType.simpleString() for f in spark.table(name.sql()).schema.fields
            }
            if rebuilds_whole(plan, node, state_types, ctx.table.total_records()):
                deferred, rewrite, new_rel = _rebuild(
                    ctx,
                    f"{prefix}_{key}",
                    (key, name, before),
                    node,
                    child_delta,
                    state_types,
                    averages,
                )
                writes.append(deferred)
                renderer.materialized[id(node)] = Materialized(old_rel, new_rel, None)
                continue
            distinct_views: dict[int, str] = {}
            for j, call in agg.distinct_calls(node):
                dkey = f"{key}_d{j}"
                dname = table_name_of(states[dkey])
                dold = select(["*"], table_ref(dname, snapshot_of(states[dkey])))
                dchange = keep(
                    spark.sql(spark_sql(agg.distinct_change_sql(node, call, child_delta, dold))),
                    exactly=False,
                )
                dview = f"{prefix}_{dkey}_chg"
                dchange.createOrReplaceTempView(dview)
                views.append(dview)
                ddview = f"{prefix}_{dkey}_dd"
                spark.sql(
                    spark_sql(agg.distinct_count_delta_sql(node, j, dview))
                ).createOrReplaceTempView(ddview)
                views.append(ddview)
                distinct_views[j] = ddview
                dtable = load_table(spark, dname)
                drows = dtable.total_records() if dtable is not None else None
                if drows is not None and drows <= REWRITE_MAX_ROWS:
                    spark.sql(agg.distinct_rewrite_statement(node, dname.sql(), dview))
                else:
                    spark.sql(agg.distinct_merge_statement(node, dname.sql(), dview))
                dafter, dstaged = written_snapshot(
                    spark, dname, ctx.job_id, snapshot_of(states[dkey])
                )
                if dstaged and dafter is not None:
                    publish_first.append((dname, dafter))
                states[dkey] = {"table": str(dname), "snapshot": dafter}
            change = spark.sql(
                spark_sql(agg.change_sql(node, child_delta, state_old, state_types, distinct_views))
            )
            # values that depend on the order of floating-point additions are computed
            # once: the state and the table must get the same ones (engine/checkpoint.py)
            rounding = bool(agg.floating_sums(node, state_types)) or agg.recomputes_all(node)
            change = keep(change, rounding)
            change_view = f"{prefix}_{key}_chg"
            change.createOrReplaceTempView(change_view)
            views.append(change_view)
            # an exact (integer/decimal) sum's flag is constant false: no job to look at it
            floating = {f"r_{name}" for name in agg.floating_sums(node, state_types)}
            flags = [
                f for f in agg.recompute_flags(node) if f in floating or not _is_sum_flag(node, f)
            ]
            recomputed = change.where(" OR ".join(flags)).count() if flags else 0
            if recomputed:
                recompute_view = f"{prefix}_{key}_rec"
                spark.sql(
                    spark_sql(
                        agg.recompute_sql(
                            node,
                            rel_within_change(renderer, node.child, node.keys, NEW),
                            change_view,
                        )
                    )
                ).createOrReplaceTempView(recompute_view)
                views.append(recompute_view)
                patched = keep(
                    spark.sql(spark_sql(agg.patch_sql(node, change_view, recompute_view))),
                    rounding,
                )
                change_view = f"{prefix}_{key}_chg2"
                patched.createOrReplaceTempView(change_view)
                views.append(change_view)
                ctx.stats[f"{key}.recomputed_groups"] = recomputed
            write = _StateWrite(
                spark,
                ctx.job_id,
                key,
                node,
                name,
                before,
                agg.rewrite_statement(node, name.sql(), change_view),
                agg.merge_statement(node, name.sql(), change_view),
            )
            out = select(["*"], sub(agg.output_delta_sql(node, change_view, averages)))
            if node is last_write_free:
                # nothing above reads this aggregate's new state, only its delta: its
                # state is written while the table is (see _apply_beside)
                deferred = write
                new_rel = exp.select(alias(raise_error(f"{UNWRITTEN} {name}"), "_unwritten"))
            else:
                write.run()
                new_rel = agg.finalized(node, select(["*"], table_ref(name, write.after)), averages)
            renderer.materialized[id(node)] = Materialized(old_rel, new_rel, out)
            writes.append(write)
        faults.reach("after_compute")
        delta_sql = delta_output_sql(plan, renderer, columns)
        maps = entries_columns(plan, columns)

        def apply() -> Applied:
            if rewrite is not None:
                return rewrite.run(ctx.dt.name.sql(), output_sql(plan, renderer, columns))
            if delta_sql is not None and _inserts_only(plan, captures):
                append_delta(spark, ctx.dt.name.sql(), columns, delta_sql, maps)
                staged = load_table(spark, ctx.dt.name)
                snap = staged.staged_snapshot(ctx.job_id) if staged is not None else None
                added = int(snap.summary.get("added-records", "0") or 0) if snap else 0
                return Applied(added, 0)
            if delta_sql is not None:
                fields = ctx.table.partition_fields()
                return apply_delta(
                    spark,
                    ctx.dt.name.sql(),
                    columns,
                    delta_sql,
                    prefix,
                    ctx.table.total_records(),
                    Partitioning(tuple(fields), ctx.table.count_files) if fields else None,
                    maps,
                )
            return Applied(0, 0)

        applied = _apply_beside(apply, deferred)
        for write in writes:
            if write.staged is not None:
                publish_first.append((write.name, write.staged))
            states[write.key] = {"table": str(write.name), "snapshot": write.after}
        return WriteResult(
            applied.rows_inserted,
            applied.rows_deleted,
            state_tables=states,
            publish_first=publish_first,
            unchanged=applied.unchanged,
        )
    finally:
        for df in cached:
            df.unpersist()
        for df in checkpoints:
            release(df)
        for view in views:
            forget_view(spark, view)
        if rewrite is not None:
            rewrite.close()
        task_sets.close()


UNWRITTEN = "dyntables: internal error: read the new state before it was written:"


def _rebuild(
    ctx: RefreshContext,
    prefix: str,
    state: tuple[str, TableName, int | None],
    node: Aggregate,
    child_delta: exp.Query,
    state_types: Mapping[str, str],
    averages: Mapping[str, str],
) -> tuple[_StateWrite, _Rewrite, exp.Query]:
    """A small aggregate under projections that show all of it (``state``: its key,
    state table and recorded snapshot): the write of its new state (old state plus the
    delta, summed by group), the rewrite of the table from the same new state, and the
    aggregate's new rows that rewrite renders the table from. The general way joins the
    change with the state, derives the output's delta and merges it into the table.

    The new state is cached and both writes read it: planned once, computed once. (Each
    write computing it again from the pinned old state and change was slower: planning
    it twice at once took longer than planning and caching it once.)"""

    key, name, before = state
    rebuild = agg.rebuild_sql(
        node, child_delta, select(["*"], table_ref(name, before)), state_types
    )
    cached, readable = cached_alone(ctx.spark.sql(spark_sql(rebuild)), f"{prefix}_new")
    view = f"{prefix}_new"
    readable.createOrReplaceTempView(view)
    write = _StateWrite(
        ctx.spark,
        ctx.job_id,
        key,
        node,
        name,
        before,
        agg.rebuilt_state_statement(node, name.sql(), select(["*"], view)),
    )
    rewrite = _Rewrite(ctx.spark, cached, view, node, averages)
    return write, rewrite, agg.finalized(node, select(["*"], rewrite.observed), averages, "n_")


class _Rewrite:
    """The table written from an aggregate's new state (``cached``, a temp view named
    ``view``), counting the rows inserted and deleted group by group as it goes
    (observed metrics: no job of their own)."""

    def __init__(
        self, spark: Any, cached: Any, view: str, node: Aggregate, averages: Mapping[str, str]
    ) -> None:
        self.spark, self.cached, self.view = spark, cached, view
        self.observed = f"{view}_obs"
        self.counts = agg.rebuilt_row_counts(node, averages)

    def run(self, table_sql: str, rows_sql: str) -> Applied:
        """Overwrite the table with ``rows_sql`` (which reads :attr:`observed`)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation(f"{self.view}_counts")
        inserted, deleted = (F.expr(spark_sql(c)) for c in self.counts)
        self.spark.table(self.view).observe(
            observation, inserted.alias("ins"), deleted.alias("del")
        ).createOrReplaceTempView(self.observed)
        try:
            self.spark.sql(f"INSERT OVERWRITE {table_sql} {rows_sql}")
        finally:
            forget_view(self.spark, self.observed)
        counts = observed(observation, ("ins", "del"))
        ins, dels = int(counts["ins"]), int(counts["del"])
        return Applied(ins, dels, unchanged=ins == 0 and dels == 0)

    def close(self) -> None:
        self.cached.unpersist()
        forget_view(self.spark, self.view)


def _weigh_before_writing(
    ctx: RefreshContext,
    plan: Plan,
    captures: Mapping[str, Capture],
    sources: BoundSources,
    states: Mapping[str, Mapping[str, object]],
    recompute_if: Callable[[ReadEstimate], bool],
) -> None:
    """AUTO: weigh every statement the delta rules will run (each aggregate's input, and
    what lies above the last aggregate) before anything is written; RecomputeCheaper
    when their reads reach a recompute's. Above an aggregate, its state before the
    refresh stands in for both its values and its change: the change's size hardly
    matters there (no key range reaches through an aggregate, so its join terms read the
    other side whole either way), and overcounting it errs towards recomputing a
    statement that reads the unchanged side whole anyway. An aggregate that recomputes
    the groups its change touches (STDDEV, ...) also reads those groups' input again."""
    tops = [n.child for _, n in aggregate_nodes(plan)]
    if not isinstance(plan.root, Aggregate):
        tops.append(plan.root)
    deltas, rows = sources.delta_views, sources.source_rows
    recomputing = [n for _, n in aggregate_nodes(plan) if recomputes_large_input(n, deltas, rows)]
    if not recomputing and not any(reads_large_input(t, deltas, rows) for t in tops):
        return
    spark = ctx.spark
    cached_reads = sum(
        c.read_rows for c in captures.values() if c.method not in (APPEND, INITIAL, NONE)
    )
    weigher = ReadWeigher(
        spark, recompute_if, ctx.stats, cached_reads, ctx.table.total_records() or 0
    )
    renderer = Renderer(sources)
    main, sources.renderer = sources.renderer, renderer  # column types of outer joins
    try:
        for key, node in aggregate_nodes(plan):
            state = select(["*"], table_ref(table_name_of(states[key]), snapshot_of(states[key])))
            value = agg.finalized(node, state, avg_types(spark, renderer, node))
            changed = renderer.delta(node.child) is not None
            stand_in = (
                select(["*", alias(exp.Literal.number(1), W)], sub(value)) if changed else None
            )
            renderer.materialized[id(node)] = Materialized(value, value.copy(), stand_in)
        for top in tops:
            delta = renderer.delta(top)
            if delta is not None:
                weigher.weigh(spark_sql(delta), spark_sql(renderer.rel(top, NEW)))
        for node in recomputing:  # the touched groups' input, read again
            weigher.weigh(spark_sql(rel_within_change(renderer, node.child, node.keys, NEW)), None)
    except Exception:  # a shape the stand-ins cannot render: no estimate, stay incremental
        return
    finally:
        sources.renderer = main
    weigher.decide()


def written_snapshot(
    spark: Any, name: TableName, job_id: str, before: int | None
) -> tuple[int | None, bool]:
    """The state snapshot a write just made, and whether it is staged (a state table
    created before state writes committed directly still has WAP on)."""
    table = load_table(spark, name)
    if table is None:
        raise StateMissingError(f"{DYNTABLES_PREFIX}state table {name} is missing")
    current = table.current_snapshot_id()
    if current != before:
        return current, False
    staged = table.staged_snapshot(job_id)
    return (staged.snapshot_id, True) if staged is not None else (before, False)


class _StateWrite:
    """One aggregate's state update: ``statement`` (a rewrite of a small state), or
    ``large`` instead when the state has more than REWRITE_MAX_ROWS rows (a MERGE). It
    commits at once, not staged: nothing reads a state table but its own dynamic
    table's refresh, which reads the snapshot the table recorded and rolls back a state
    committed by a refresh that then failed (``_recover_state``). That saves a publish
    commit per aggregate. ``after`` is the state snapshot the table will reflect."""

    def __init__(
        self,
        spark: Any,
        job_id: str,
        key: str,
        node: Aggregate,
        name: TableName,
        before: int | None,
        statement: str,
        large: str | None = None,
    ) -> None:
        self.spark, self.job_id, self.key, self.node, self.name = spark, job_id, key, node, name
        self.statement, self.large = statement, large
        self.after = before
        self.staged: int | None = None

    def run(self) -> None:
        statement = self.statement
        if self.large is not None:
            table = load_table(self.spark, self.name)
            rows = table.total_records() if table is not None else None
            if rows is None or rows > REWRITE_MAX_ROWS:
                statement = self.large
        self.spark.sql(statement)
        self.after, staged = written_snapshot(self.spark, self.name, self.job_id, self.after)
        self.staged = self.after if staged else None


def rebuilds_whole(
    plan: Plan, node: Aggregate, state_types: Mapping[str, str], table_rows: int | None
) -> bool:
    """Whether the refresh rewrites the table from the aggregate's new state (see
    :func:`_rebuild`): the aggregate is all the table shows, its state is additive, and
    the table small."""
    return (
        node is shown_whole(plan)
        and agg.rebuildable(node, state_types)
        and table_rows is not None
        and table_rows <= SINGLE_JOB_MAX_ROWS
    )


def shown_whole(plan: Plan) -> Aggregate | None:
    """The aggregate under the root's projections when they show each of its columns as
    it is (renamed, reordered, beside computed ones): then its output rows are its groups,
    one each, and the table can be rewritten from its new state and counted group by
    group (see :func:`dyntables.ivm.aggregate.rebuilt_row_counts`)."""
    node = plan.root
    while isinstance(node, Project):
        shown = {e.name for e in node.exprs if isinstance(e, exp.Column)}
        if not set(node.child.columns) <= shown:
            return None
        node = node.child
    return node if isinstance(node, Aggregate) else None


def under_rowwise_root(plan: Plan) -> Aggregate | None:
    """The aggregate under the root's projections and filters (HAVING, computed output
    columns): their delta rules read only its delta, never its new state, so its state
    can be written while the table is."""
    node = plan.root
    while isinstance(node, Project | Filter):
        node = node.child
    return node if isinstance(node, Aggregate) else None


def _apply_beside(apply: Callable[[], Applied], state: _StateWrite | None) -> Applied:
    """Write the table, and the state nothing else waits for in a second thread: the two
    writes are independent (both read the cached change), so their planning, jobs and
    commits overlap. Both finish before this returns, whichever fails."""
    if state is None:
        return apply()
    from pyspark import InheritableThread  # keeps the refresh's job group and pool

    failure: list[BaseException] = []

    def run() -> None:
        try:
            state.run()
        except BaseException as exc:  # re-raised in the refresh's thread
            failure.append(exc)

    writer = InheritableThread(target=run, name=f"state {state.name}")
    writer.start()
    try:
        applied = apply()
    finally:
        writer.join()
    if failure:
        raise failure[0]
    return applied


def _inserts_only(plan: Plan, captures: Mapping[str, Capture]) -> bool:
    """Every source only gained rows and the plan keeps them positive: append the delta."""
    return keeps_inserts_positive(plan.root) and all(
        c.method in (APPEND, INITIAL, NONE) for c in captures.values()
    )


def _is_sum_flag(node: Any, flag: str) -> bool:
    return any(flag == f"r_{names['s']}" for _, names in agg.layout(node).aggs if "s" in names)


def _recover_state(spark: Any, states: dict[str, dict[str, object]]) -> None:
    """Undo state committed by a refresh that failed before its table commit. A state
    table compacted since (``rewrite_data_files``: ``replace`` snapshots) holds the same
    rows and is kept; one whose recorded snapshot was expired since cannot be read as
    it was, and the refresh rebuilds it (FULL, STATE_MISSING): rolling back to it
    failed every refresh."""
    for info in states.values():
        name = table_name_of(info)
        table = load_table(spark, name)
        if table is None:
            raise StateMissingError(f"{DYNTABLES_PREFIX}state table {name} is missing")
        recorded, current = snapshot_of(info), table.current_snapshot_id()
        if recorded is not None and current != recorded:
            if table.snapshot(recorded) is None:
                raise StateMissingError(
                    f"{DYNTABLES_PREFIX}state table {name} no longer has the snapshot the "
                    f"last refresh recorded ({recorded}; expired)"
                )
            chain = table.ancestors_between(current, recorded) if current is not None else None
            if chain and all(s.operation == "replace" for s in chain):
                continue
            table.rollback_to(recorded)
        elif recorded is None and current is not None:
            # there is no snapshot to go back to: the refresh falls back to FULL, which
            # builds new state
            raise StateMissingError(
                f"{DYNTABLES_PREFIX}state table {name} was written after the refresh that recorded it"
            )
