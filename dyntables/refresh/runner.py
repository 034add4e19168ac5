"""Running one refresh: pin sources, decide, compute, stage, publish, record.

The commit point is a single Iceberg metadata commit on the dynamic table that makes
the staged data current *and* records the source snapshots it reflects
(:meth:`IcebergTable.publish`). Everything before it is invisible (WAP-staged), so a
crash at any step leaves the table exactly as it was before the refresh, and the next
refresh starts from the recorded snapshots: nothing lost, nothing applied twice. The
commit carries the refresh's history row too, for the next refresh to record if this
process dies before it does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dyntables.catalog.definition import PREFIX, DynamicTableDef, RefreshState, SourceVersion
from dyntables.catalog.iceberg import CommitCheck, IcebergTable, SnapshotInfo, load_table
from dyntables.engine.errors import refresh_hint, summary
from dyntables.engine.metrics import input_rows
from dyntables.errors import (
    ChangedMeanwhileError,
    DynTablesError,
    RefreshConflictError,
    RefreshFailedError,
    TableNotFoundError,
)
from dyntables.refresh import faults
from dyntables.refresh.changes import compacted_only, reads_file_metadata
from dyntables.refresh.compaction import compact_if_fragmented
from dyntables.refresh.day import DAY_CHANGED, dated, today
from dyntables.refresh.full import current_sources
from dyntables.refresh.history import (
    FAILED,
    FULL,
    INCREMENTAL,
    MANUAL,
    NO_DATA,
    SUCCEED,
    HistoryRecord,
    record_from_text,
    record_text,
    source_tables_json,
    stats_json,
)
from dyntables.refresh.ids import new_job_id, now_ms
from dyntables.refresh.locks import Lease, RefreshLocks
from dyntables.refresh.planner import TABLE_CHANGED
from dyntables.refresh.retention import maintain
from dyntables.refresh.sessions import (
    close_catalogs,
    label_jobs,
    rows_together,
    thread_properties_kept,
    work_session,
)
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from dyntables.catalog.registry import Registry

# the table property where a refresh's publish carries its history row
RECORD = PREFIX + "refresh.record"
# a refresh's stats: "compacted_files.<table>" is "rewritten -> written" files
COMPACTED = "compacted_files"
LOST_NOTE = (
    "recorded by a later refresh: the process of this one stopped after its commit, "
    "before it recorded it"
)


@dataclass(frozen=True)
class RefreshOutcome:
    name: str
    state: str
    # None on a FAILED refresh that failed before it chose a mode: it did not run FULL
    refresh_mode: str | None
    rows_inserted: int
    rows_deleted: int
    duration_ms: int
    job_id: str
    reason: str | None = None
    error: str | None = None
    # after a committed refresh: its table's files compacted ("64 -> 1"), or why the
    # retention or compaction that follows a commit failed (the refresh stands)
    compacted: str | None = None
    maintenance_error: str | None = None


@dataclass
class RefreshContext:
    """What one refresh knows; executors read it and add to ``stats``."""

    spark: Any  # a child session with spark.wap.id = job_id
    dt: DynamicTableDef
    table: IcebergTable
    previous: RefreshState | None
    pinned: dict[str, SourceVersion]
    job_id: str
    stats: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteResult:
    rows_inserted: int
    rows_deleted: int
    # aggregate state the table now reflects: key -> {"table": name, "snapshot": id}
    state_tables: dict[str, dict[str, object]] = field(default_factory=dict)
    # staged state snapshots to make current before the table's own commit
    publish_first: list[tuple[TableName, int]] = field(default_factory=list)
    # set when the executor changed its mind (e.g. INCREMENTAL fell back to FULL)
    mode: str | None = None
    reason: str | None = None
    # the table's staged snapshot holds the rows it had (a rewrite that changed nothing)
    unchanged: bool = False


Executor = Callable[[RefreshContext], WriteResult]


class Refresher:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.spark = registry.spark
        self.history = registry.history
        self.locks = RefreshLocks(self.spark, registry.system_root)

    def refresh(
        self,
        dt: DynamicTableDef,
        trigger: str = MANUAL,
        *,
        force_full: bool = False,
        wait: bool = True,
        table: IcebergTable | None = None,
        suspends_if_failed: str | None = None,
    ) -> RefreshOutcome:
        """``table``: the dynamic table just loaded by the caller, to spare a reload;
        ``suspends_if_failed``: the scheduler's reason for suspending the table should
        this refresh fail (its last allowed failure). The refresh then suspends it
        before its FAILED history row is written, so the row's ``suspended_reason`` says
        what is so, and the error it raises carries the reason."""
        if not force_full:
            outcome = self._no_data_without_lease(dt, trigger, table)
            if outcome is not None:
                return outcome
        lease = self.locks.acquire(dt.dt_id, wait=wait)
        if lease is None:
            raise RefreshConflictError(
                f"dynamic table {dt.name} is being refreshed right now; try again"
            )
        with lease, thread_properties_kept(self.spark.sparkContext):
            if lease.taken_over:
                self._record_lost(dt)
            return self._refresh_locked(dt, trigger, force_full, suspends_if_failed, lease)

    def _no_data_without_lease(
        self, dt: DynamicTableDef, trigger: str, table: IcebergTable | None = None
    ) -> RefreshOutcome | None:
        """NO_DATA from metadata alone, before taking the lease (a file create and delete):
        the table already reflects its sources' current snapshots. A refresh running
        meanwhile cannot make that untrue; anything else is decided under the lease."""
        started = datetime.now(UTC)
        t0 = time.monotonic()
        table = table or load_table(self.spark, dt.name)
        if table is None:
            return None
        properties = table.properties()
        previous = RefreshState.from_properties(properties)
        if previous is None:
            return None
        dt = DynamicTableDef.from_properties(dt.name, properties) or dt
        if today(self.spark, dt) != previous.day:
            return None  # its query reads CURRENT_DATE, another day now
        pinned, missing, _, _ = current_sources(self.spark, dt)
        if missing or not _unchanged(previous, pinned) or _changed_outside(table, previous):
            return None
        if self.locks.stale(dt.dt_id):
            return None  # its last refresh's process died: see _record_lost, under the lease
        return self._no_data(dt, trigger, started, t0, new_job_id(), None)

    # -- the steps -----------------------------------------------------------------------
    def _refresh_locked(
        self,
        dt: DynamicTableDef,
        trigger: str,
        force_full: bool,
        suspends: str | None,
        lease: Lease,
    ) -> RefreshOutcome:
        started = datetime.now(UTC)
        t0 = time.monotonic()
        job_id = new_job_id()
        table = load_table(self.spark, dt.name)
        if table is None:  # the caller found it: dropped while the lease was waited for
            raise TableNotFoundError(
                f"dynamic table {dt.name} was dropped before this refresh could start; "
                "nothing was refreshed"
            )
        properties = table.properties()
        dt = DynamicTableDef.from_properties(dt.name, properties) or dt
        previous = RefreshState.from_properties(properties)
        mode: str | None = None
        reason: str | None = None
        result: WriteResult | None = None
        published = False
        session: Any = None
        try:
            # the day its query reads as CURRENT_DATE, the same for all it runs; on
            # another day than the last refresh's, the rows it returns changed too
            day = today(self.spark, dt)
            new_day = previous is not None and day != previous.day
            dt = dated(dt, day)
            pinned, missing, source_rows, loaded = current_sources(self.spark, dt)
            faults.reach("after_pin_sources")
            if missing:
                return self._no_data(dt, trigger, started, t0, job_id, _dropped(missing[0]))
            moved = previous is not None and _changed_outside(table, previous)
            if previous is not None and not (force_full or moved or new_day):
                if _unchanged(previous, pinned):
                    return self._no_data(dt, trigger, started, t0, job_id, None)
                compacted = (
                    []
                    if reads_file_metadata(dt.query)
                    else _only_compacted(loaded, previous, pinned)
                )
                if compacted:
                    # no row changed: record the sources' new snapshots, so the next
                    # refresh is NO_DATA from metadata alone (a FULL-mode table, or one
                    # whose query has no delta rule, recomputed here before)
                    state = RefreshState(
                        job_id,
                        now_ms(),
                        pinned,
                        NO_DATA,
                        previous.state_tables,
                        table.current_snapshot_id(),
                        day,
                    )
                    table.publish(None, state.to_properties(), _as_found(table, dt, previous))
                    return self._no_data(
                        dt, trigger, started, t0, job_id, None, {"compacted": ", ".join(compacted)}
                    )
            rows = rows_together([source_rows, table.total_records()])
            session = self._child_session(job_id, dt, rows)
            mode, reason, executor = self.registry.planner.choose(
                dt, previous, pinned, force_full or moved or new_day, session, loaded
            )
            if moved and not force_full:
                reason = TABLE_CHANGED
            elif new_day and not force_full:
                reason = DAY_CHANGED
            ctx = RefreshContext(
                spark=session,
                dt=dt,
                table=table,
                previous=previous,
                pinned=pinned,
                job_id=job_id,
            )
            if day is not None:
                ctx.stats["current_date"] = day
            result = executor(ctx)
            mode, reason = result.mode or mode, result.reason if result.mode else reason
            read = input_rows(session, job_id)
            if read is not None:
                ctx.stats["input_rows"] = read
            faults.reach("after_write")
            staged = load_table(self.spark, dt.name)
            assert staged is not None
            snapshot = staged.staged_snapshot(job_id)
            if snapshot is None and (result.rows_inserted or result.rows_deleted):
                raise RefreshFailedError(
                    f"it wrote {result.rows_inserted} rows and removed {result.rows_deleted}, "
                    f"but its write (wap.id {job_id}) is not in the table's metadata; nothing "
                    "was published. Refresh it again"
                )
            if snapshot is not None and (snapshot.adds_nothing or result.unchanged):
                snapshot = None  # publishing it would show downstream a change of nothing
            if snapshot is not None and (
                snapshot.parent_id != staged.current_snapshot_id()
                or _written_between(staged, snapshot.parent_id, table.current_snapshot_id())
            ):
                raise _written_meanwhile(dt)
            # nothing published: the table is as the refresh found it (a commit since is
            # someone else's, for the next refresh to notice)
            own = snapshot.snapshot_id if snapshot else table.current_snapshot_id()
            state = RefreshState(job_id, now_ms(), pinned, mode, result.state_tables, own, day)
            faults.reach("before_publish")
            for state_name, state_snapshot in result.publish_first:
                state_table = load_table(self.spark, state_name)
                assert state_table is not None
                state_table.publish(state_snapshot, {})
            faults.reach("after_publish_state")
            stats = {
                "rows_inserted": result.rows_inserted,
                "rows_deleted": result.rows_deleted,
                **ctx.stats,
            }
            if reason:
                stats["full_reason"] = reason
            # the row this refresh records, committed with it: if its process dies before
            # recording it, the next refresh does, as it stands here (see _record_lost)
            ending = self._row(
                dt,
                trigger,
                started,
                _succeeded(dt, mode, result, t0, job_id, reason, stats),
                {**stats, "note": LOST_NOTE},
            )
            _publish(
                staged,
                snapshot,
                {**state.to_properties(), RECORD: record_text(ending)},
                _as_found(staged, dt, previous, snapshot.parent_id if snapshot else None),
            )
            published = True
            faults.reach("after_publish")
            self._drop_obsolete(previous, result)
            if lease.held():
                self._maintain(dt, staged, state, stats, session)
            else:  # paused past the lease: its new holder may have staged a snapshot
                stats["maintenance"] = "skipped: the refresh lease was taken over meanwhile"
            outcome = _succeeded(dt, mode, result, t0, job_id, reason, stats)
            self.history.append([self._row(dt, trigger, started, outcome, stats)])
            return outcome
        except Exception as exc:
            if result is not None and not published:
                self._drop_unpublished(dt, previous, result)
            gone = None if published else self._dropped_source(dt, exc)
            if gone is not None:
                # dropped while it was read: Iceberg says only that a file is missing
                # (helper-26); the same as a source dropped before the refresh
                return self._no_data(dt, trigger, started, t0, job_id, _dropped(gone))
            said: Exception = exc
            if not published and not isinstance(exc, DynTablesError | faults.InjectedFault):
                # Iceberg's or Spark's word for a table dropped under a paused refresh is
                # a missing file or a column count (helper-33)
                said = self._dropped_meanwhile(dt) or exc
            message = said.one_line() if isinstance(said, DynTablesError) else summary(said)
            message = " ".join(message.split())[:2000] + refresh_hint(said)
            outcome = RefreshOutcome(
                str(dt.name),
                FAILED,
                mode,
                0,
                0,
                int((time.monotonic() - t0) * 1000),
                job_id,
                reason,
                message,
            )
            suspended = self._suspend(dt, suspends, message) if suspends else None
            try:
                stats = {"rows_inserted": 0, "rows_deleted": 0}
                failed = dt.with_options(suspended_reason=suspended) if suspended else dt
                self.history.append([self._row(failed, trigger, started, outcome, stats, message)])
            except Exception:  # the history write must not hide the refresh's own error
                pass
            if isinstance(exc, faults.InjectedFault):
                raise
            if isinstance(said, DynTablesError):  # its own code, said once
                failure = RefreshFailedError(
                    f"refresh of {dt.name} failed: {' '.join(said.message.split())[:2000]}"
                )
                failure.code = said.code
            else:
                failure = RefreshFailedError(f"refresh of {dt.name} failed: {message}")
            failure.suspended_reason = suspended
            raise failure from exc
        finally:
            if session is not None:
                close_catalogs(session)

    def _suspend(self, dt: DynamicTableDef, reason: str, error: str) -> str | None:
        """Suspend ``dt`` after its last allowed failure; the reason it now has, or None
        when it was not suspended here (a user suspended or dropped it first, or the
        catalog refused: the scheduler then tries itself)."""
        full = f"{reason}; last error: {error}"[:1000]
        try:
            return full if self.registry.suspend(dt.name, full) else None
        except Exception:
            return None

    def _dropped_meanwhile(self, dt: DynamicTableDef) -> DynTablesError | None:
        """The error to report when ``dt`` was dropped (and perhaps created again)
        while it was being refreshed: possible only past its lease, by a process that
        took the lease over as stale."""
        try:
            now = load_table(self.spark, dt.name)
            found = DynamicTableDef.from_properties(dt.name, now.properties()) if now else None
        except Exception:
            return None
        if found is not None and found.dt_id == dt.dt_id:
            return None
        again = "" if now is None else " and created again"
        return ChangedMeanwhileError(
            f"dynamic table {dt.name} was dropped{again} while it was being refreshed; "
            "nothing was published"
        )

    def _dropped_source(self, dt: DynamicTableDef, exc: Exception) -> TableName | None:
        """A source of ``dt`` that no longer exists, after a refresh failed with ``exc``."""
        if isinstance(exc, faults.InjectedFault):
            return None
        try:
            return next((s for s in dt.sources if load_table(self.spark, s) is None), None)
        except Exception:
            return None

    def _drop_obsolete(self, previous: RefreshState | None, result: WriteResult) -> None:
        if previous is None:
            return
        keep = {str(v["table"]) for v in result.state_tables.values()}
        stale = [
            str(v["table"]) for v in previous.state_tables.values() if str(v["table"]) not in keep
        ]
        if stale:
            from dyntables.refresh.compiled import drop_state_tables

            drop_state_tables(self.spark, stale)

    def _drop_unpublished(
        self, dt: DynamicTableDef, previous: RefreshState | None, result: WriteResult
    ) -> None:
        """State tables a failed refresh built (a FULL's fresh ones) that the table never
        came to name: no refresh will read them. What the table names now is read back,
        in case its publish went through and only its answer was lost."""
        named = {str(v["table"]) for v in previous.state_tables.values()} if previous else set()
        try:
            table = load_table(self.spark, dt.name)
            now = RefreshState.from_properties(table.properties()) if table else None
        except Exception:  # unknown: keep them (an orphan costs disk, never correctness)
            return
        if now is not None:
            named |= {str(v["table"]) for v in now.state_tables.values()}
        orphans = [
            str(v["table"]) for v in result.state_tables.values() if str(v["table"]) not in named
        ]
        if orphans:
            from dyntables.refresh.compiled import drop_state_tables

            drop_state_tables(self.spark, orphans)

    def _maintain(
        self,
        dt: DynamicTableDef,
        table: IcebergTable,
        state: RefreshState,
        stats: dict[str, object],
        session: Any,
    ) -> None:
        """Expire what retention no longer keeps (see retention.py) and compact the
        table's small files (see compaction.py); the refresh has committed, so a
        failure here is reported in its stats and fails nothing."""
        try:
            expired = maintain(self.registry, dt, table, state, now_ms())
            for name, count in expired.items():
                stats[f"expired_snapshots.{name.rsplit('.', 1)[-1]}"] = count
            compacted = compact_if_fragmented(session, table)
            if compacted:
                stats[f"{COMPACTED}.{dt.name.parts[-1]}"] = "{} -> {}".format(*compacted)
        except Exception as exc:
            stats["maintenance_error"] = " ".join(summary(exc).split())[:200]

    def _child_session(self, job_id: str, dt: DynamicTableDef, rows: int | None) -> Any:
        """A session of its own: spark.wap.id stages only this refresh's writes, and the
        job group/pool make the refresh visible (and schedulable) as one unit. It is a
        clone of the session refreshing, with the settings results depend on (time
        zone, ANSI mode, Spark's legacy behaviours) as the session that created the
        table had them. ``rows``: what
        the sources and the table hold together (see sessions.SMALL_DATA_ROWS)."""
        settings = {
            "spark.wap.id": job_id,
            **dt.settings,  # as the rows already there were computed
            # an overwrite must replace the whole table, whatever the user's session says
            "spark.sql.sources.partitionOverwriteMode": "static",
        }
        session = work_session(self.spark, settings, rows, only_these=dt.settings_whole)
        label_jobs(self.spark.sparkContext, job_id, f"refresh {dt.name}", dt.vcluster.lower())
        return session

    def _no_data(
        self,
        dt: DynamicTableDef,
        trigger: str,
        started: datetime,
        t0: float,
        job_id: str,
        reason: str | None,
        extra: dict[str, object] | None = None,
    ) -> RefreshOutcome:
        outcome = RefreshOutcome(
            str(dt.name),
            SUCCEED,
            NO_DATA,
            0,
            0,
            int((time.monotonic() - t0) * 1000),
            job_id,
            reason,
        )
        stats: dict[str, object] = {"rows_inserted": 0, "rows_deleted": 0, **(extra or {})}
        if reason:
            stats["note"] = reason
        self.history.append([self._row(dt, trigger, started, outcome, stats)])
        return outcome

    def _row(
        self,
        dt: DynamicTableDef,
        trigger: str,
        started: datetime,
        outcome: RefreshOutcome,
        stats: dict[str, object],
        error: str | None = None,
    ) -> HistoryRecord:
        return HistoryRecord(
            workspace_name=dt.catalog,
            schema_name=dt.schema,
            name=dt.table,
            virtual_cluster=dt.vcluster,
            start_time=started,
            end_time=datetime.now(UTC),
            duration_ms=outcome.duration_ms,
            state=outcome.state,
            refresh_trigger=trigger,
            suspended_reason=dt.suspended_reason,
            refresh_mode=outcome.refresh_mode,
            error_message=error,
            source_tables=source_tables_json(dt.sources),
            stats=stats_json(stats),
            completion_target=None,
            job_id=outcome.job_id,
        )

    def _record_lost(self, dt: DynamicTableDef) -> None:
        """The history row of the table's last refresh, if its process died between
        the publish and the row (helper-24 saw it once in 1,355 refreshes): the publish
        carried the row (``RECORD``), without what maintenance after it would have
        added. Asked only when a dead holder's lease is taken over."""
        try:
            table = load_table(self.spark, dt.name)
            properties = table.properties() if table is not None else {}
            previous = RefreshState.from_properties(properties)
            if previous is None or RECORD not in properties:
                return
            row = record_from_text(properties[RECORD])
            if row.job_id != previous.refresh_id or self.history.recorded(row.job_id):
                return
            self.history.append([row])
        except Exception:
            pass  # a history row, not the data: never a reason to fail this refresh


def _dropped(source: TableName | str) -> str:
    return f"source {source} was dropped; keeping the current data until it is recreated"


def _succeeded(
    dt: DynamicTableDef,
    mode: str,
    result: WriteResult,
    t0: float,
    job_id: str,
    reason: str | None,
    stats: dict[str, object],
) -> RefreshOutcome:
    compacted = next((str(v) for k, v in stats.items() if k.startswith(f"{COMPACTED}.")), None)
    error = stats.get("maintenance_error")
    return RefreshOutcome(
        str(dt.name),
        SUCCEED,
        mode,
        result.rows_inserted,
        result.rows_deleted,
        int((time.monotonic() - t0) * 1000),
        job_id,
        reason,
        compacted=compacted,
        maintenance_error=None if error is None else str(error),
    )


def _publish(
    table: IcebergTable, snapshot: SnapshotInfo | None, props: dict[str, str], check: CommitCheck
) -> None:
    """The refresh's commit point. Its write is staged off the main branch until now, so
    an ``expire_snapshots`` run in the meantime can remove it with its files; Iceberg
    then says only that the snapshot is unknown (helper-23)."""
    try:
        table.publish(snapshot.snapshot_id if snapshot else None, props, check)
    except DynTablesError:
        raise
    except Exception:
        now = load_table(table.spark, table.name)
        if snapshot is None or now is None or now.snapshot(snapshot.snapshot_id) is not None:
            raise
        raise RefreshConflictError(
            f"dynamic table {table.name}'s new snapshot {snapshot.snapshot_id} was expired "
            "before it was published (expire_snapshots ran during the refresh); nothing was "
            "published. Refresh it again"
        ) from None


def _as_found(
    table: IcebergTable,
    dt: DynamicTableDef,
    previous: RefreshState | None,
    parent: int | None = None,
) -> CommitCheck:
    """A refresh's publish commits only over the table as the refresh found it: the
    refresh state it started from (a CREATE OR REPLACE writes another, and so does a
    refresh in a process that took this one's lease over as stale) and, when it
    publishes a snapshot, no row written since that snapshot's ``parent``. The checks
    before the publish ran a moment earlier, and Iceberg re-applied the publish over
    whatever had landed since: the rows of a replaced query were published under the new
    one, and no later refresh noticed (helper-32)."""
    started_from = previous.refresh_id if previous is not None else None

    def check(props: Mapping[str, str], current: int | None) -> None:
        found = RefreshState.from_properties(props)
        if (found.refresh_id if found is not None else None) != started_from:
            raise RefreshConflictError(
                f"dynamic table {dt.name} was replaced, or refreshed by another process, "
                "while this refresh ran; nothing was published. Refresh it again"
            )
        if parent is not None and _written_between(table, current, parent):
            raise _written_meanwhile(dt)

    return check


def _written_meanwhile(dt: DynamicTableDef) -> RefreshConflictError:
    """Found before the publish, or by its commit's check: the same error."""
    return RefreshConflictError(
        f"dynamic table {dt.name} changed while it was being refreshed; the refresh was discarded"
    )


def _changed_outside(table: IcebergTable, previous: RefreshState) -> bool:
    """Whether the table's rows are no longer those the last refresh published: it was
    rolled back (``CALL ... rollback_to_snapshot``) or written through Spark directly,
    and an incremental refresh would apply its delta to the wrong rows."""
    recorded = previous.table_snapshot
    return recorded is not None and _written_between(table, table.current_snapshot_id(), recorded)


def _written_between(table: IcebergTable, newer: int | None, older: int | None) -> bool:
    """Whether rows were written to the table between snapshot ``older`` and snapshot
    ``newer``: anything but compactions (``replace`` snapshots, which change no row),
    or ``older`` not an ancestor of ``newer``. Also asked of a refresh's own write: a
    user's INSERT under it was kept, published as the refresh's own, and no later
    refresh noticed it (helper-23)."""
    if newer == older:
        return False
    if newer is None:
        return True
    chain = table.ancestors_between(newer, older)
    return chain is None or any(s.operation != "replace" for s in chain)


def _only_compacted(
    tables: dict[str, IcebergTable], previous: RefreshState, pinned: dict[str, SourceVersion]
) -> list[str]:
    """The sources that moved since the last refresh when each moved by compactions
    alone (no row changed), else none. ``tables``: the sources as loaded for ``pinned``."""
    if set(previous.sources) != set(pinned):
        return []
    moved = [k for k, v in sorted(pinned.items()) if previous.sources[k] != v]
    if not all(compacted_only(tables[k], previous.sources[k], pinned[k]) for k in moved):
        return []
    return moved


def _unchanged(previous: RefreshState, pinned: dict[str, SourceVersion]) -> bool:
    return set(previous.sources) == set(pinned) and all(
        previous.sources[k] == v for k, v in pinned.items()
    )


__all__ = ["FULL", "INCREMENTAL", "RefreshContext", "RefreshOutcome", "Refresher", "WriteResult"]
