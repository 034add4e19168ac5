"""Executing our statements. Each handler turns one statement (frozen data from
``dyntables.sql``) into catalog/refresh calls and returns a small result DataFrame."""

from __future__ import annotations

import dataclasses
import fnmatch
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dyntables.catalog.definition import (
    ACTIVE,
    DEFAULT_RETENTION_DAYS,
    PREFIX,
    SUSPENDED,
    DynamicTableDef,
    RefreshState,
    SourceVersion,
)
from dyntables.catalog.iceberg import CommitCheck, IcebergTable, load_table
from dyntables.catalog.registry import Registry
from dyntables.engine.determinism import non_deterministic_call
from dyntables.engine.frames import rows_frame
from dyntables.errors import (
    ChangedMeanwhileError,
    DynamicTableDmlError,
    DynTablesError,
    InvalidOptionError,
    NotADynamicTableError,
    SqlSyntaxError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedQueryError,
    UseDropDynamicTableError,
)
from dyntables.plan.build import case_twins
from dyntables.plan.query import (
    check_deterministic,
    clock_calls,
    current_date_unclear,
    files_read_by_path,
    names_beyond_tables,
    non_deterministic,
    parse_query,
    reads_context,
    reads_current_date,
    refs_read,
    session_calls,
    session_dependent,
    source_tables,
)
from dyntables.refresh.changes import reads_file_metadata
from dyntables.refresh.compiled import drop_state_tables
from dyntables.refresh.day import dated, today
from dyntables.refresh.full import contents_sql, current_sources, pinned_query_sql, pinned_sql
from dyntables.refresh.history import (
    FAILED,
    FULL,
    MANUAL,
    SUCCEED,
    HistoryRecord,
    source_tables_json,
    stats_json,
)
from dyntables.refresh.ids import new_job_id, now_ms
from dyntables.refresh.planner import INITIAL
from dyntables.refresh.retention import METADATA_PROPERTIES
from dyntables.refresh.sessions import (
    catalogs_closed,
    label_jobs,
    reads_sql_otherwise,
    result_settings,
    rows_together,
    thread_properties_kept,
    work_session,
)
from dyntables.sql.statements import (
    ALTER_TAG,
    AlterDynamicTable,
    CreateDynamicTable,
    DescribeDynamicTable,
    DropDynamicTable,
    ExplainDynamicTable,
    RefreshDynamicTable,
    SetTableProperties,
    ShowDynamicTables,
    ShowRefreshHistory,
    Statement,
    UndropTable,
)
from dyntables.sql.tokens import TableName, back_quoted, quote_part

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dyntables.lakehouse import Lakehouse

MAX_RETENTION_DAYS = 90
DML_VERBS = {"INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE"}


def _lit(value: str) -> str:
    return exp.Literal.string(value).sql("spark")


def _partition_sql(item: str) -> str:
    """A partition column, quoted; a transform is kept as the grammar normalized it."""
    return item if "(" in item else back_quoted(item)


def format_interval(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    for unit, size in (("DAY", 86400), ("HOUR", 3600), ("MINUTE", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} SECOND"


class Commands:
    def __init__(self, lh: Lakehouse) -> None:
        self.lh = lh
        self.spark = lh.spark
        self.registry = Registry(lh.spark, lh.catalog, lh.qualify)
        self._handlers: dict[type, Callable[[Any], DataFrame]] = {
            CreateDynamicTable: self.create,
            RefreshDynamicTable: self.refresh,
            ShowDynamicTables: self.show_tables,
            DescribeDynamicTable: self.describe,
            ShowRefreshHistory: self.show_history,
            DropDynamicTable: self.drop,
            UndropTable: self.undrop,
            AlterDynamicTable: self.alter,
            SetTableProperties: self.set_properties,
            ExplainDynamicTable: self.explain,
        }

    def close(self) -> None:
        self.registry.history.flush()

    def execute(self, statement: Statement) -> DataFrame:
        return self._handlers[type(statement)](statement)

    # -- guards ------------------------------------------------------------------------
    def guard_write(self, verb: str, name: TableName) -> None:
        dt = self.registry.find(name)
        if dt is None or verb == ALTER_TAG:
            return
        if verb == "DROP":
            raise UseDropDynamicTableError(
                f"{dt.name} is a dynamic table: use DROP DYNAMIC TABLE {dt.table} (UNDROP TABLE can restore it)"
            )
        if verb == "REPLACE":
            raise DynamicTableDmlError(
                f"dynamic table {dt.name} cannot be replaced with CREATE OR REPLACE TABLE or "
                "REPLACE TABLE: change its query with CREATE OR REPLACE DYNAMIC TABLE, or drop "
                f"it with DROP DYNAMIC TABLE {dt.table}"
            )
        if verb in DML_VERBS:
            raise DynamicTableDmlError(
                f"dynamic table {dt.name} is read-only ({verb} refused): its rows come from its query; "
                "modify its source tables, or change the query with CREATE OR REPLACE DYNAMIC TABLE"
            )
        raise DynamicTableDmlError(
            f"dynamic table {dt.name} cannot be altered with ALTER TABLE: use ALTER DYNAMIC TABLE, "
            "ALTER TABLE ... SET PROPERTIES, ALTER TABLE ... CREATE TAG, or CREATE OR REPLACE "
            "DYNAMIC TABLE"
        )

    # -- CREATE ------------------------------------------------------------------------
    def create(self, stmt: CreateDynamicTable) -> DataFrame:
        name = self.lh.qualify(stmt.name)
        catalog = self.registry.catalog
        if name.parts[0] != catalog:
            # the scheduler, SHOW, the history and the trash all work in one catalog: a
            # table elsewhere would never be refreshed on its interval, nor listed
            raise InvalidOptionError(
                f"cannot create dynamic table {name}: dynamic tables live in catalog "
                f"{catalog}, this Lakehouse's; name it {catalog}.{'.'.join(name.parts[1:])} "
                f"(its sources may be in any catalog), or open a Lakehouse on catalog "
                f"{name.parts[0]}"
            )
        table, existing = self.registry.load(name)
        if table is not None:
            if existing is None:
                raise TableExistsError(
                    f"{name} exists and is a regular table; drop it or choose another name"
                )
            if stmt.if_not_exists:
                return self._ok()
            if not stmt.or_replace:
                raise TableExistsError(
                    f"dynamic table {name} already exists; use CREATE OR REPLACE DYNAMIC TABLE to change it"
                )
        if existing is None:
            return self._create(stmt, name, table, None)
        # under the table's lease, as DROP: a refresh publishing meanwhile put the
        # replaced query's rows under the new query, and the state tables the replace
        # dropped were gone from under a refresh reading them (helper-32)
        lease = self.registry.refresher.locks.acquire(existing.dt_id)
        assert lease is not None  # waited for
        with lease:
            table, now = self.registry.load(name)
            if now is None or now.dt_id != existing.dt_id:
                raise ChangedMeanwhileError(
                    f"dynamic table {name} was dropped or recreated while CREATE OR REPLACE "
                    "waited for its refresh to end; nothing was changed. Run the statement again"
                )
            return self._create(stmt, name, table, now)

    def _create(
        self,
        stmt: CreateDynamicTable,
        name: TableName,
        table: IcebergTable | None,
        existing: DynamicTableDef | None,
    ) -> DataFrame:
        """CREATE, or the replace of ``existing`` (loaded under its lease)."""
        otherwise = reads_sql_otherwise(self.spark)
        if otherwise is not None:
            key, value = otherwise
            raise UnsupportedQueryError(
                f"dynamic table {name}: {key} is {self.spark.conf.get(key)}, under which "
                f"Spark reads SQL otherwise than dynamic tables do; SET {key} = {value} "
                "and write the query for it"
            )
        try:
            query = parse_query(stmt.query)
        except (UnsupportedQueryError, SqlSyntaxError) as exc:
            raise type(exc)(f"dynamic table {name}: {exc.message}") from exc
        check_deterministic(query, str(name))
        beyond = names_beyond_tables(query)
        if beyond:
            raise UnsupportedQueryError(
                f"dynamic table {name} reads {beyond[0]}: a branch, tag or metadata table "
                "named as a table is not tracked as a source; read a branch or tag with "
                "VERSION AS OF 'name' (t VERSION AS OF 'b')"
            )
        files = files_read_by_path(query)
        if files:
            raise UnsupportedQueryError(
                f"dynamic table {name} reads files by their path ({files[0]}); it reads "
                "tables, whose commits say what changed: create an Iceberg table from "
                f"the files first (CREATE TABLE t AS SELECT * FROM {files[0]})"
            )
        sources = source_tables(query, self.lh.qualify)
        if name in sources:
            raise UnsupportedQueryError(f"dynamic table {name} cannot read itself")
        if reads_context(query, stmt.query):
            columns = self._columns_of(sources)
            session = session_calls(query, stmt.query, columns)
            if session:
                raise session_dependent(str(name), session[0])
            clock = clock_calls(stmt.query, columns)
            if clock:
                raise non_deterministic(str(name), clock[0])
        if reads_current_date(stmt.query):
            unclear = current_date_unclear(query, stmt.query, self._columns_of(sources))
            if unclear is not None:
                raise UnsupportedQueryError(f"dynamic table {name}: {unclear}")
        loop = self._reads_back(name, sources)
        if loop:
            # the scheduler can order no refresh of a loop (helper-26: it stopped refreshing
            # the tables on it and below it, saying nothing)
            raise UnsupportedQueryError(
                f"dynamic table {name} cannot read {loop[0]}: "
                f"{' -> '.join(str(t) for t in loop)} reads {name}, which would make a loop"
            )
        dotted = next((t for t in [name, *sources] if any("." in p for p in t.parts)), None)
        if dotted is not None:
            # the refresh state and the history name tables catalog.namespace.table
            raise InvalidOptionError(
                f"dynamic table {name}: {dotted.sql()} has a dot inside a name part, which "
                "dynamic tables do not support; rename it (ALTER TABLE ... RENAME TO)"
            )
        bare = {t.name.lower() for t in query.find_all(exp.Table) if not t.args.get("db")}
        pinned, source_rows = self._pin(sources, refs_read(query, self.lh.qualify), bare)
        self._refuse_names_told_apart_by_case(name, sources)
        retention = self._retention_at_create(stmt, name)
        dt = DynamicTableDef(
            name=name,
            dt_id=existing.dt_id if existing else uuid.uuid4().hex,
            query=stmt.query,
            sources=tuple(sources),
            interval_seconds=stmt.interval_seconds,
            refresh_mode=stmt.refresh_mode,
            vcluster=stmt.vcluster,
            created_ms=existing.created_ms if existing else now_ms(),
            retention_days=(
                retention
                if retention is not None
                else existing.retention_days
                if existing
                else DEFAULT_RETENTION_DAYS
            ),
            comment=stmt.comment,
            partitioned_by=stmt.partitioned_by,
            user_properties={k: v for k, v in stmt.properties if k != "data_retention_days"},
            settings=result_settings(self.spark),
            settings_whole=True,
            query_namespace=(self.lh.catalog, self.lh.namespace),
        )
        if (
            existing is not None
            and table is not None
            and existing.settings == dt.settings  # rows computed under others: rebuild
            and self._same_shape(existing, dt, stmt, pinned)
        ):
            keep = dt.with_options(
                state=existing.state,
                suspended_reason=existing.suspended_reason,
                # the rows were computed as the existing definition says, not as this one
                settings_whole=existing.settings_whole,
                query_columns=existing.query_columns,
                plan_columns=existing.plan_columns,
            )
            table.set_properties(
                {
                    # the options changed alone: an ALTER landing meanwhile keeps its own
                    **keep.properties_changed(existing),
                    **_retention_properties(keep.retention_days),
                    **({"comment": stmt.comment} if stmt.comment else {}),
                }
            )
            return self._ok()
        replaced = _state_table_names(table) if existing is not None else []
        with thread_properties_kept(self.spark.sparkContext):
            self._build(dt, stmt, query, pinned, source_rows, replace=existing is not None)
        # the replaced generation's aggregate state: read by nothing any more
        kept = set(_state_table_names(load_table(self.spark, name)))
        drop_state_tables(self.spark, [t for t in replaced if t not in kept])
        return self._ok()

    def _pin(
        self,
        sources: list[TableName],
        refs: Mapping[TableName, frozenset[str]],
        bare: Collection[str],
    ) -> tuple[dict[str, SourceVersion], int | None]:
        """The sources' current snapshots (and those of the branches and tags the query
        reads by name; ``bare``: the names it reads unqualified, which may be temporary
        views), and the rows they hold together (None when a snapshot does not
        say)."""
        pinned: dict[str, SourceVersion] = {}
        counts: list[int | None] = []
        for source in sources:
            table = load_table(self.spark, source)
            if table is None:
                kind = self._kind_of_non_iceberg(source, source.table.lower() in bare)
                if kind == "VIEW":
                    raise UnsupportedQueryError(
                        f"source {source.parts[-1]} is a view; a dynamic table reads tables, "
                        "whose commits say what changed: read the view's tables in the "
                        "query, or make the view a dynamic table of its own"
                    )
                if kind is not None:
                    raise UnsupportedQueryError(
                        f"source {source} is {kind}; a dynamic table reads Iceberg tables, "
                        "whose snapshots say what changed: copy it into one (CREATE TABLE "
                        "... AS SELECT in an Iceberg catalog) or convert it with Iceberg's "
                        "migrate procedure"
                    )
                raise TableNotFoundError(
                    f"source table {source} not found (or not an Iceberg table); create it before the dynamic table"
                )
            if not table.loads_itself():
                raise UnsupportedQueryError(
                    f"source {source} names a branch, tag or snapshot of a table, which is "
                    "not tracked as a source; read it with VERSION AS OF 'name' "
                    "(t VERSION AS OF 'b')"
                )
            if table.is_metadata_table:
                raise UnsupportedQueryError(
                    f"source {source} is a metadata table, which changes without a commit "
                    "of its own; a dynamic table reads tables"
                )
            version = table.version(refs.get(source, ()))
            gone = [ref for ref, snap in version.refs if snap is None]
            if gone:
                raise TableNotFoundError(
                    f"source {source} has no branch or tag '{gone[0]}' to read VERSION AS OF; "
                    "create it before the dynamic table"
                )
            pinned[str(source)] = version
            counts.append(table.total_records())
        return pinned, rows_together(counts)

    def _kind_of_non_iceberg(self, source: TableName, written_bare: bool) -> str | None:
        """What Spark resolves a name to where no Iceberg table is: ``VIEW`` for a
        temporary view (read by a one-part name, as Spark resolves it only then) or a
        view in the catalog; what a table of another format is (``a parquet table``);
        None when nothing is there. Only the message depends on it: a
        user who sees "not found" for a table they can query looks for a typo."""
        here = source.parts[:-1] == self.lh.qualify(TableName((source.table,))).parts[:-1]
        names = [(quote_part(source.table), True)] if written_bare and here else []
        for name, temporary_too in [*names, (source.sql(), False)]:
            try:
                found = self.spark.catalog.getTable(name)
            except Exception:  # noqa: BLE001 - not found: only the message depends on it
                continue
            if (temporary_too and found.isTemporary) or str(found.tableType).upper() == "VIEW":
                return "VIEW"
            if not temporary_too:
                return self._other_format(name)
        return None

    def _other_format(self, name: str) -> str | None:
        """A catalog table's format as DESCRIBE TABLE EXTENDED gives it, when not
        Iceberg."""
        try:
            described = self.spark.sql(f"DESCRIBE TABLE EXTENDED {name}")
            provider = described.where("col_name = 'Provider'").select("data_type").first()
        except Exception:  # noqa: BLE001 - only the message depends on it
            return "not an Iceberg table"
        fmt = str(provider[0]).lower() if provider and provider[0] else ""
        if fmt == "iceberg":
            return None
        return f"a {fmt} table" if fmt else "not an Iceberg table"

    def _refuse_names_told_apart_by_case(self, name: TableName, sources: list[TableName]) -> None:
        """Dynamic tables resolve column names as Spark does by default, whatever their
        case: under spark.sql.caseSensitive, a source with columns ``a`` and ``A`` had
        one read for the other, silently."""
        if str(self.spark.conf.get("spark.sql.caseSensitive")).lower() != "true":
            return
        for source in sources:
            twins = case_twins(self.spark.table(source.sql()).columns)
            if twins is not None:
                raise UnsupportedQueryError(
                    f"dynamic table {name}: source {source} has columns {twins[0]} and "
                    f"{twins[1]}, told apart by case alone, which dynamic tables do not "
                    "tell apart; rename one, or SET spark.sql.caseSensitive = false "
                    "and read them by other names"
                )

    def _retention_at_create(self, stmt: CreateDynamicTable, name: TableName) -> int | None:
        """PROPERTIES ('data_retention_days'=...) at CREATE, as ALTER sets it (the seeds
        only ALTER it; a user should not need two statements). None when not given."""
        days = None
        for key, value in stmt.properties:
            if key == "data_retention_days":
                days = _retention_days(value, name)
            elif key.startswith(PREFIX) or key.lower() in _STAGING:
                raise InvalidOptionError(
                    f"property {key} is managed by dyntables and cannot be set"
                )
        return days

    def _same_shape(
        self,
        old: DynamicTableDef,
        new: DynamicTableDef,
        stmt: CreateDynamicTable,
        pinned: dict[str, SourceVersion],
    ) -> bool:
        """Options-only change? Then data and state are kept (no rebuild). Not when the
        same text now returns other columns (a source's changed under ``SELECT *``)."""
        if (
            _normalized(old.query) != _normalized(new.query)
            or old.sources != new.sources  # the same text read in another namespace
            or old.partitioned_by != new.partitioned_by
            or stmt.columns
        ):
            return False
        query = f"SELECT * FROM ({pinned_query_sql(self.spark, new, pinned)}) AS q"
        returns = [n.lower() for n in self.spark.sql(query).schema.names]
        return returns == [f.name.lower() for f in self.spark.table(new.name.sql()).schema.fields]

    def _build(
        self,
        dt: DynamicTableDef,
        stmt: CreateDynamicTable,
        query: exp.Query,
        pinned: dict[str, SourceVersion],
        source_rows: int | None,
        replace: bool,
    ) -> None:
        """CTAS (or atomic RTAS for OR REPLACE): data, definition and refresh state in one
        commit. It runs in a session of its own, planned like a refresh of as many rows
        (see sessions.SMALL_DATA_ROWS) and labelled as one unit, as a refresh is."""
        started = datetime.now(UTC)
        t0 = time.monotonic()
        job_id = new_job_id()
        with catalogs_closed(work_session(self.spark, {}, source_rows)) as spark:
            label_jobs(self.spark.sparkContext, job_id, f"create {dt.name}", dt.vcluster.lower())
            day = today(spark, dt)  # built as of the day it reads as CURRENT_DATE
            built = dated(dt, day)
            if day is not None:
                query = parse_query(built.query)
            query_sql = pinned_sql(spark, query, self.lh.qualify, pinned)
            schema = self._analyze(spark, query_sql, dt, built.query)
            columns = (
                [c.name for c in stmt.columns] if stmt.columns else [f.name for f in schema.fields]
            )
            if len(columns) != len(schema.fields):
                raise InvalidOptionError(
                    f"dynamic table {dt.name} lists {len(columns)} columns but its query returns {len(schema.fields)}"
                )
            compiled = self.registry.planner.compile_for_create(
                built, columns, [(f.name, f.dataType.simpleString()) for f in schema.fields]
            )
            options = {
                "query_columns": tuple(schema.names),
                "plan_columns": tuple(compiled.plan.output_names) if compiled.plan else (),
            }
            dt, built = dt.with_options(**options), built.with_options(**options)
            contents, states = contents_sql(spark, built, compiled.plan, pinned, columns, job_id)
            state = RefreshState(job_id, now_ms(), pinned, FULL, states, day=day)
            props = {
                **dt.to_properties(),
                **state.to_properties(),
                **dict.fromkeys(_STAGING, "true"),
                **METADATA_PROPERTIES,
                **_retention_properties(dt.retention_days),
            }
            props_sql = ", ".join(f"{_lit(k)}={_lit(v)}" for k, v in props.items())
            col_list = ", ".join(back_quoted(c) for c in columns)
            verb = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE"
            ddl = f"{verb} {dt.name.sql()} USING iceberg"
            if dt.partitioned_by:
                ddl += (
                    " PARTITIONED BY ("
                    + ", ".join(_partition_sql(c) for c in dt.partitioned_by)
                    + ")"
                )
            if dt.comment:
                ddl += f" COMMENT {_lit(dt.comment)}"
            ddl += f" TBLPROPERTIES ({props_sql}) AS SELECT * FROM ({contents}) AS q({col_list})"
            try:
                spark.sql(ddl)
            except Exception as exc:
                drop_state_tables(self.spark, [str(v["table"]) for v in states.values()])
                self._record_build(dt, started, t0, job_id, None, exc)
                raise
            for col in stmt.columns:
                if col.comment:
                    self.spark.sql(
                        f"ALTER TABLE {dt.name.sql()} ALTER COLUMN {back_quoted(col.name)} COMMENT {_lit(col.comment)}"
                    )
            table = load_table(self.spark, dt.name)
            if table is not None:
                # the CTAS's snapshot, known only now: a rollback or an outside write before
                # the first refresh is noticed too (see RefreshState.table_snapshot)
                found = dataclasses.replace(state, table_snapshot=table.current_snapshot_id())
                table.set_properties(found.to_properties())
            self._record_build(dt, started, t0, job_id, table, None)

    def _columns_of(self, sources: list[TableName]) -> list[str]:
        """The columns of the sources there are (a missing one is refused later)."""
        names: list[str] = []
        for source in sources:
            try:
                names += self.spark.table(source.sql()).schema.names
            except Exception:  # noqa: BLE001 - not there: its own error comes next
                continue
        return names

    def _reads_back(self, name: TableName, sources: list[TableName]) -> list[TableName] | None:
        """A chain of dynamic tables from one of ``sources`` to one reading ``name``;
        loads the tables upstream of ``sources`` only."""
        stack = [[s] for s in sources]
        seen: set[str] = set()
        while stack:
            path = stack.pop()
            if str(path[-1]) in seen:
                continue
            seen.add(str(path[-1]))
            upstream = self.registry.find(path[-1])
            if upstream is None:
                continue
            if any(str(s) == str(name) for s in upstream.sources):
                return path
            stack += [[*path, s] for s in upstream.sources]
        return None

    def _analyze(self, spark: Any, pinned_sql: str, dt: DynamicTableDef, text: str) -> Any:
        """The query's schema, refused as Spark would refuse to run it. The table is built
        from the compiled plan, not from the query, so a query Spark analyzes but cannot
        plan (a subquery correlated with a MAP's value, refused by the optimizer) would
        otherwise make a table its own query could never be checked against."""
        try:
            df = spark.sql(pinned_sql)  # analysis only: no job runs
            df._jdf.queryExecution().optimizedPlan()  # planning only, likewise
        except Exception as exc:
            from dyntables.engine.errors import translate

            err = translate(exc, dt.query)
            raise type(err)(
                f"the query of dynamic table {dt.name} is invalid: {err.message}"
            ) from exc
        call = non_deterministic_call(df)  # what Spark knows beyond the names refused
        if call is not None:
            raise non_deterministic(str(dt.name), call)
        # the text as the creating session reads it: its namespace, its temporary views
        _refuse_read_otherwise(self.spark, text, df.schema, dt)
        return df.schema

    def _record_build(
        self,
        dt: DynamicTableDef,
        started: datetime,
        t0: float,
        job_id: str,
        table: Any,
        exc: Exception | None,
    ) -> None:
        stats: dict[str, object] = {"rows_inserted": 0, "rows_deleted": 0, "full_reason": INITIAL}
        if table is not None:
            snap = table.current_snapshot()
            if snap is not None:
                stats["rows_inserted"] = snap.summary.get("added-records", "0")
        error = None
        if exc is not None:
            from dyntables.engine.errors import translate

            error = translate(exc).one_line()
        self.registry.history.append(
            [
                HistoryRecord(
                    dt.catalog,
                    dt.schema,
                    dt.table,
                    dt.vcluster,
                    started,
                    datetime.now(UTC),
                    int((time.monotonic() - t0) * 1000),
                    FAILED if exc else SUCCEED,
                    MANUAL,
                    None,
                    FULL,
                    error,
                    source_tables_json(dt.sources),
                    stats_json(stats),
                    None,
                    job_id,
                )
            ]
        )

    def _load_dynamic(self, name: TableName) -> tuple[IcebergTable, DynamicTableDef]:
        """The dynamic table ``name`` and its definition, read together in one load."""
        table, dt = self.registry.load(name)
        if table is None or dt is None:
            self.registry.get(name)  # raises the right "not found" / "not dynamic" error
            raise ChangedMeanwhileError(
                f"dynamic table {self.lh.qualify(name)} was created just now; run the "
                "statement again"
            )
        return table, dt

    # -- REFRESH -----------------------------------------------------------------------
    def refresh(self, stmt: RefreshDynamicTable) -> DataFrame:
        table, dt = self._load_dynamic(stmt.name)
        out = self.registry.refresher.refresh(dt, MANUAL, table=table, force_full=stmt.full)
        return rows_frame(
            self.spark,
            "name string, state string, refresh_mode string, rows_inserted bigint, rows_deleted bigint, "
            "duration string, job_id string",
            [
                (
                    out.name.split(".")[-1],
                    out.state,
                    out.refresh_mode,
                    out.rows_inserted,
                    out.rows_deleted,
                    _duration(out.duration_ms),
                    out.job_id,
                )
            ],
        )

    # -- SHOW / DESCRIBE -----------------------------------------------------------------
    def show_tables(self, stmt: ShowDynamicTables) -> DataFrame:
        rows = []
        now = now_ms()
        for dt in self.registry.all(self._shown_namespace(stmt.namespace)):
            if stmt.like and not _like(dt.table, stmt.like):
                continue
            table = load_table(self.spark, dt.name)
            state = RefreshState.from_properties(table.properties()) if table else None
            lag = self._lag_seconds(dt, state, now)
            rows.append(
                (
                    dt.table,
                    dt.schema,
                    format_interval(dt.interval_seconds),
                    dt.refresh_mode,
                    dt.state,
                    datetime.fromtimestamp(state.time_ms / 1000, UTC) if state else None,
                    state.mode if state else None,
                    dt.vcluster,
                    ", ".join(str(s) for s in dt.sources),
                    lag,
                    dt.suspended_reason,
                )
            )
        schema = (
            "name string, schema_name string, refresh_interval string, refresh_mode string, state string, "
            "last_refresh_time timestamp, last_refresh_mode string, virtual_cluster string, "
            "source_tables string, data_lag_seconds double, suspended_reason string"
        )
        base = rows_frame(self.spark, schema, rows)
        latest = (
            self.spark.sql(
                "SELECT name AS h_name, schema_name AS h_schema, state AS last_refresh_state, "
                "error_message AS last_error FROM (SELECT *, row_number() OVER (PARTITION BY schema_name, name "
                f"ORDER BY start_time DESC) AS rn FROM {self.registry.history.current_table()}) WHERE rn = 1"
            )
            if rows
            else None
        )
        if latest is None:  # nothing listed: the same columns, in the same order
            joined = base.selectExpr(
                "*",
                "CAST(NULL AS string) AS last_refresh_state",
                "CAST(NULL AS string) AS last_error",
            )
        else:
            self.registry.history.ensure()
            joined = base.join(
                latest, (base.name == latest.h_name) & (base.schema_name == latest.h_schema), "left"
            )
        return joined.select(
            "name",
            "schema_name",
            "refresh_interval",
            "refresh_mode",
            "state",
            "last_refresh_time",
            "last_refresh_mode",
            "last_refresh_state",
            "data_lag_seconds",
            "source_tables",
            "virtual_cluster",
            "suspended_reason",
            "last_error",
        ).orderBy("name")

    def _lag_seconds(
        self, dt: DynamicTableDef, state: RefreshState | None, now: int
    ) -> float | None:
        """How far behind its sources: the age of the oldest source commit it does not
        reflect, on a source's main history or on a branch or tag the query reads by
        name (a ref moves without a commit to main). Unknown (NULL) while a source, or
        a ref it reads, is gone: no refresh can catch up until it is back (it showed 0,
        as if the table were current)."""
        if state is None:
            return None
        current = current_sources(self.spark, dt)
        if current.missing:
            return None
        oldest: int | None = None
        for name, version in current.pinned.items():
            recorded = state.sources.get(name)
            if recorded is None:
                continue
            table = current.tables[name]
            seen_refs = dict(recorded.refs)
            heads = [(version.snapshot, recorded.snapshot)]
            heads += [(snap, seen_refs.get(ref)) for ref, snap in version.refs]
            for head, seen in heads:
                if head is None or head == seen:
                    continue
                chain = table.ancestors_between(head, seen) if recorded.uuid == table.uuid else None
                if chain and not reads_file_metadata(dt.query):
                    # a compaction changes no row: the table reflects it already
                    chain = [s for s in chain if s.operation != "replace"]
                    if not chain:
                        continue
                first = chain[0] if chain else table.snapshot(head)
                if first is not None:
                    oldest = (
                        first.timestamp_ms if oldest is None else min(oldest, first.timestamp_ms)
                    )
        return 0.0 if oldest is None else round(max(0, now - oldest) / 1000, 3)

    def _shown_namespace(self, name: TableName | None) -> str:
        """SHOW ... IN [catalog.]namespace: within the catalog the registry reads (the
        Lakehouse's, whatever a USE moved to)."""
        catalog = self.registry.catalog
        if name is None:
            if self.lh.catalog != catalog:
                raise InvalidOptionError(
                    f"SHOW DYNAMIC TABLES: the current catalog is {self.lh.catalog}, and "
                    f"dynamic tables live in catalog {catalog}; name a namespace: SHOW "
                    f"DYNAMIC TABLES IN {catalog}.<namespace>"
                )
            return self.lh.namespace
        parts = name.parts
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != catalog):
            raise InvalidOptionError(
                f"SHOW DYNAMIC TABLES IN {name}: name a namespace of catalog "
                f"{catalog} (ns or {catalog}.ns)"
            )
        namespace = parts[-1]
        if not self.spark.catalog.databaseExists(TableName((catalog, namespace)).sql()):
            raise TableNotFoundError(
                f"namespace {catalog}.{namespace} not found; "
                f"check the name with SHOW NAMESPACES IN {catalog}"
            )
        return namespace

    def describe(self, stmt: DescribeDynamicTable) -> DataFrame:
        dt = self.registry.get(stmt.name)
        table = load_table(self.spark, dt.name)
        state = RefreshState.from_properties(table.properties()) if table else None
        rows: list[tuple[str, str | None, str | None]] = []
        for field in self.spark.table(dt.name.sql()).schema.fields:
            rows.append((field.name, field.dataType.simpleString(), field.metadata.get("comment")))
        decision = self.registry.planner.describe(dt)
        rows += [
            ("", None, None),
            ("# Dynamic Table Information", None, None),
            ("Name", str(dt.name), None),
            ("Definition", dt.query, None),
            ("Sources", ", ".join(str(s) for s in dt.sources), None),
            ("Refresh interval", format_interval(dt.interval_seconds), None),
            ("Refresh mode", dt.refresh_mode, "requested"),
            ("Effective refresh mode", decision[0], decision[1]),
            ("Virtual cluster", dt.vcluster, None),
            ("State", dt.state, dt.suspended_reason),
            ("Data retention days", str(dt.retention_days), None),
            ("Comment", dt.comment, None),
        ]
        if state is not None:
            rows.append(
                (
                    "Last refresh",
                    datetime.fromtimestamp(state.time_ms / 1000, UTC).isoformat(),
                    f"{state.mode} job {state.refresh_id}",
                )
            )
        if stmt.extended:
            rows.append(
                ("Created", datetime.fromtimestamp(dt.created_ms / 1000, UTC).isoformat(), None)
            )
            if state is not None:
                for src, version in sorted(state.sources.items()):
                    rows.append(("Source snapshot", src, str(version.snapshot)))
            for key, value in sorted(dt.user_properties.items()):
                rows.append(("Property", key, value))
            for line in self.registry.planner.explain_lines(dt):
                rows.append(("Plan", line[0], line[1]))
        return rows_frame(self.spark, "col_name string, data_type string, comment string", rows)

    def show_history(self, stmt: ShowRefreshHistory) -> DataFrame:
        return self.registry.history.show(stmt.where, stmt.limit)

    def explain(self, stmt: ExplainDynamicTable) -> DataFrame:
        dt = self.registry.get(stmt.name)
        rows = self.registry.planner.explain_lines(dt)
        return rows_frame(self.spark, "item string, detail string", rows)

    # -- DROP / UNDROP / ALTER -----------------------------------------------------------
    def drop(self, stmt: DropDynamicTable) -> DataFrame:
        table, dt = self.registry.load(stmt.name)
        if table is None:
            if stmt.if_exists:
                return self._ok()
            raise TableNotFoundError(
                f"dynamic table {self.lh.qualify(stmt.name)} not found; nothing dropped"
            )
        if dt is None:
            raise NotADynamicTableError(
                f"{self.lh.qualify(stmt.name)} is a regular table: use DROP TABLE"
            )
        # under the table's lease: a refresh running meanwhile wrote files where the table
        # had been, and UNDROP then restored the table into them (helper-26)
        lease = self.registry.refresher.locks.acquire(dt.dt_id)
        assert lease is not None  # waited for
        with lease:
            self.registry.trash.drop(dt.name, dt.dt_id, dt.retention_days)
        return self._ok()

    def undrop(self, stmt: UndropTable) -> DataFrame:
        self.registry.trash.undrop(self.lh.qualify(stmt.name))
        return self._ok()

    def alter(self, stmt: AlterDynamicTable) -> DataFrame:
        table, dt = self._load_dynamic(stmt.name)
        if stmt.action == "SUSPEND":
            updated = dt.with_options(state=SUSPENDED, suspended_reason="suspended by user")
        elif stmt.action == "RESUME":
            updated = dt.with_options(state=ACTIVE, suspended_reason=None)
        elif stmt.interval_seconds is not None or stmt.clear_interval:
            updated = dt.with_options(interval_seconds=stmt.interval_seconds)
        elif stmt.vcluster is not None:
            updated = dt.with_options(vcluster=stmt.vcluster)
        else:
            updated = dt.with_options(refresh_mode=stmt.refresh_mode)
            columns = [f.name for f in self.spark.table(dt.name.sql()).schema.fields]
            self.registry.planner.compile_for_create(updated, columns)
        # the options changed, alone; a refresh mode over the query it was checked against
        check = _still(dt, query_too=updated.refresh_mode != dt.refresh_mode)
        table.set_properties(updated.properties_changed(dt), check=check)
        return self._ok()

    def set_properties(self, stmt: SetTableProperties) -> DataFrame:
        name = self.lh.qualify(stmt.name)
        table, dt = self.registry.load(name)
        if table is None:
            raise TableNotFoundError(f"table {name} not found; check the name with SHOW TABLES")
        props: dict[str, str] = {}
        for key, value in stmt.properties:
            if key == "data_retention_days":
                days = _retention_days(value, name)
                props.update(_retention_properties(days))
                props[PREFIX + "retention_days"] = str(days)
            elif key.startswith(PREFIX) or (dt is not None and key.lower() in _STAGING):
                raise InvalidOptionError(
                    f"property {key} is managed by dyntables and cannot be set"
                    + (" (each refresh stages its commit with it)" if dt is not None else "")
                )
            else:
                props[key] = value
        table.set_properties(props)
        return self._ok()

    def _ok(self) -> DataFrame:
        """What Spark returns for DDL: a frame with no columns (no job, no Python worker)."""
        return self.spark.range(0).select()


# a dynamic table's refresh stages its commit (write-audit-publish) and publishes it
# with the refresh state: with it off, a refresh committed at once, and every later
# refresh took the table for changed outside (FULL, TABLE_CHANGED; helper-20)
_STAGING = {"write.wap.enabled"}


def _still(dt: DynamicTableDef, query_too: bool) -> CommitCheck:
    """An ALTER's commit lands only on the table it read, not on one dropped and
    recreated meanwhile; ``query_too``: only over the query it read (a REFRESH_MODE is
    checked against the query)."""

    def check(props: Mapping[str, str], _current: int | None) -> None:
        now = DynamicTableDef.from_properties(dt.name, props)
        if now is None or now.dt_id != dt.dt_id or (query_too and now.query != dt.query):
            raise ChangedMeanwhileError(
                f"dynamic table {dt.name} was dropped, recreated or replaced while "
                "ALTER ran; nothing was changed. Run it again"
            )

    return check


def _retention_properties(days: int) -> dict[str, str]:
    """Iceberg keeps the table's snapshots as long as UNDROP and time travel may need."""
    return {"history.expire.max-snapshot-age-ms": str(days * 86_400_000)}


def _retention_days(value: str, name: TableName) -> int:
    try:
        days = int(value)
    except ValueError:
        days = -1
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise InvalidOptionError(
            f"data_retention_days for {name} must be a whole number of days from 0 to {MAX_RETENTION_DAYS}, got '{value}'"
        )
    return days


def _duration(ms: int) -> str:
    return f"{ms // 86_400_000} {ms // 3_600_000 % 24:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000 * 1_000_000:09d}"


def _like(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name.lower(), pattern.lower().replace("%", "*").replace("_", "?"))


def _normalized(query: str) -> str:
    try:
        return parse_query(query).sql("spark", normalize=True)
    except DynTablesError:
        return " ".join(query.split())


def _state_table_names(table: Any) -> list[str]:
    """The aggregate state tables ``table``'s recorded refresh state reads."""
    state = RefreshState.from_properties(table.properties()) if table is not None else None
    return [str(v["table"]) for v in state.state_tables.values()] if state else []


def _refuse_read_otherwise(spark: Any, text: str, schema: Any, dt: DynamicTableDef) -> None:
    """Refuse a query whose text Spark reads otherwise than the query every refresh runs
    (sqlglot's reading of it, written back): a keyword used as a column's name
    (``GROUP BY all``, ``SELECT id isnull``) can make sqlglot read another query, whose
    columns differ in number or type. Analysis only, no job; a text Spark itself cannot
    analyze here is left to the checks above."""
    try:
        original = spark.sql(text).schema
    except Exception:  # noqa: BLE001 - Spark reports the query's own errors elsewhere
        return
    ours = [f.dataType.simpleString() for f in schema.fields]
    theirs = [f.dataType.simpleString() for f in original.fields]
    if ours == theirs:
        return
    where = next(
        (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
        min(len(ours), len(theirs)),
    )
    said = (
        f"its column {where + 1} is {theirs[where]} to Spark but {ours[where]} as dynamic "
        "tables read it"
        if where < min(len(ours), len(theirs))
        else f"Spark returns {len(theirs)} columns, dynamic tables would return {len(ours)}"
    )
    raise UnsupportedQueryError(
        f"dynamic table {dt.name}: the query reads otherwise to dynamic tables than to "
        f"Spark ({said}), likely a keyword used as a name (all, distinct, isnull): quote "
        "such names with backticks (`all`)"
    )
