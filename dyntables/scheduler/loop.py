"""Executing the plan: one loop thread plans, a thread pool refreshes.

The loop thread alone owns the planner and the cycles (no locks around decisions);
worker threads only run ``refresher.refresh`` and return what happened. Between events
the loop sleeps until the next refresh finishes, the next table falls due, or the next
tick (re-reading the catalog to notice ALTER ... SUSPEND/RESUME and new tables).

Stopping never leaves a refresh half-done: a refresh commits only at its very end (one
Iceberg metadata commit), so the loop stops starting new ones and waits for those in
flight, up to ``stop_timeout``; one still running then is abandoned and either commits
whole or not at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dyntables.catalog.definition import ACTIVE, DynamicTableDef
from dyntables.errors import DynTablesError, RefreshConflictError
from dyntables.refresh.history import NO_DATA, SYSTEM_SCHEDULED
from dyntables.scheduler import events as ev
from dyntables.scheduler.catalog import CatalogAccess
from dyntables.scheduler.plan import (
    BUSY,
    FAILED,
    NOT_RUN,
    SUCCEEDED,
    Cycle,
    Planner,
    Policy,
)

if TYPE_CHECKING:
    from dyntables.catalog.registry import Registry
    from dyntables.refresh.runner import RefreshOutcome

Clock = Callable[[], float]
MIN_SLEEP = 0.05  # never spin: at most 20 planning checks a second


@dataclass(frozen=True)
class SchedulerConfig:
    workers: int = 4  # refreshes running at once, across all pipelines
    tick: float = 1.0  # seconds between catalog re-reads when nothing else wakes the loop
    policy: Policy = field(default_factory=Policy)
    namespaces: tuple[str, ...] | None = None  # scope (default: every namespace)
    tables: tuple[str, ...] | None = None  # scope: only these tables (qualified names)
    stop_timeout: float = 60.0  # how long stop() waits for refreshes in flight
    backlog_warning_every: float = 60.0  # at most one backlog warning per table per period
    discover_every: float = 10.0  # seconds between listings of the catalog for new tables

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.tick <= 0:
            raise ValueError("tick must be > 0 seconds")


@dataclass
class SchedulerStats:
    passes: int = 0  # planning passes (catalog re-reads)
    cycles: int = 0
    refreshes: int = 0  # successful refreshes, any mode
    no_data: int = 0
    failures: int = 0
    skips: int = 0
    suspensions: int = 0


@dataclass(frozen=True)
class _Result:
    """What a worker reports back for one table."""

    status: str  # SUCCEEDED / FAILED / BUSY / NOT_RUN
    started: float
    ended: float
    outcome: RefreshOutcome | None = None
    message: str | None = None
    # the failure suspended the table (the refresh did, before its history row)
    suspended: str | None = None


@dataclass(frozen=True)
class _Task:
    cycle: Cycle
    name: str
    dt: DynamicTableDef


class Scheduler:
    """Refreshes the dynamic tables in scope when they are due; see ``plan`` for the rules.

    ``run()`` blocks (the CLI service); ``start()``/``stop()`` run the same loop on a
    background thread (notebooks, the demo). ``catalog`` replaces the catalog access
    (tests drive the loop with an in-memory catalog and refresher, no Spark).
    """

    def __init__(
        self,
        registry: Registry,
        config: SchedulerConfig | None = None,
        *,
        clock: Clock = time.time,
        listeners: Iterable[ev.Listener] = (),
        catalog: CatalogAccess | None = None,
    ) -> None:
        self.registry = registry
        self.config = config or SchedulerConfig()
        self.clock = clock
        self.catalog = catalog or CatalogAccess(
            registry, self.config.namespaces, self.config.tables, self.config.discover_every
        )
        self.planner = Planner(self.config.policy)
        self.stats = SchedulerStats()
        self.last: dict[str, ev.SchedulerEvent] = {}  # latest refresh event per table
        self._listeners: list[ev.Listener] = list(listeners)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._defs: dict[str, DynamicTableDef] = {}
        self._warned: dict[str, float] = {}
        self._finished = threading.Event()
        self._clean = True
        self._drain_timeout = self.config.stop_timeout

    # -- public -------------------------------------------------------------------------
    def add_listener(self, listener: ev.Listener) -> None:
        self._listeners.append(listener)

    def start(self) -> Scheduler:
        """Run the loop on a daemon thread; returns at once."""
        if self._thread is not None and self._thread.is_alive():
            raise DynTablesError("this scheduler is already running")
        self._stop.clear()
        self._finished.clear()
        self._thread = threading.Thread(target=self.run, name="dyntables-scheduler", daemon=True)
        self._thread.start()
        return self

    def request_stop(self, timeout: float | None = None) -> None:
        """Stop starting refreshes; the loop then waits up to ``timeout`` seconds
        (default: ``stop_timeout``) for those in flight and returns. Signal-safe."""
        if timeout is not None:
            self._drain_timeout = timeout
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop and wait; True when no refresh was left running."""
        self.request_stop(timeout)
        limit = self._drain_timeout
        if self._thread is not None:
            self._thread.join(limit + 5.0)
            return not self._thread.is_alive() and self._clean
        return self._finished.wait(limit + 5.0) and self._clean

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def as_of(self, name: str) -> float | None:
        """The table reflects every base-table commit before this time (None: unknown)."""
        record = self.planner.health.get(name)
        return record.as_of if record is not None else None

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> None:
        """Plan and refresh until :meth:`request_stop`; then drain and return."""
        executor = ThreadPoolExecutor(self.config.workers, thread_name_prefix="dyntables-refresh")
        inflight: dict[Future[_Result], _Task] = {}
        cycles: list[Cycle] = []
        next_plan = self.clock()
        self._clean = True
        try:
            while not self._stop.is_set():
                try:
                    next_plan = self._step(cycles, inflight, executor, next_plan)
                except Exception as exc:  # a bug must not end the service: report, retry later
                    self._emit(ev.SchedulerEvent(ev.ERROR, self.clock(), message=_one_line(exc)))
                    self._wake.wait(self.config.tick)
                    next_plan = self.clock()
                cycles[:] = [c for c in cycles if not c.done]
        finally:
            self._drain(inflight)
            executor.shutdown(wait=False, cancel_futures=True)
            self._finished.set()

    def _step(
        self,
        cycles: list[Cycle],
        inflight: dict[Future[_Result], _Task],
        executor: ThreadPoolExecutor,
        next_plan: float,
    ) -> float:
        """One turn of the loop: plan if it is time, start what is ready, wait for the
        next event. Returns when to plan next."""
        now = self.clock()
        if now >= next_plan:
            cycles.extend(self._plan(now, cycles))
            next_plan = self._next_plan_time(now, cycles)
        self._dispatch(cycles, inflight, executor)
        timeout = max(MIN_SLEEP, next_plan - self.clock())
        if inflight:  # a future cannot be woken by request_stop: check a few times a second
            done, _ = wait(list(inflight), timeout=min(timeout, 0.25), return_when=FIRST_COMPLETED)
            for future in done:
                self._complete(inflight.pop(future), future)
        else:
            self._wake.wait(timeout)
            self._wake.clear()
        if any(c.done for c in cycles):
            next_plan = self.clock()  # a pipeline is free: see what is due now
        return next_plan

    def run_cycle(self) -> None:
        """Plan once and run every cycle due now to the end (tests, ``--once``)."""
        executor = ThreadPoolExecutor(self.config.workers, thread_name_prefix="dyntables-refresh")
        inflight: dict[Future[_Result], _Task] = {}
        try:
            cycles = self._plan(self.clock(), [])
            while any(not c.done for c in cycles):
                self._dispatch(cycles, inflight, executor)
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for future in done:
                    self._complete(inflight.pop(future), future)
        finally:
            executor.shutdown(wait=True)

    # -- steps --------------------------------------------------------------------------
    def _plan(self, now: float, cycles: list[Cycle]) -> list[Cycle]:
        self.stats.passes += 1
        try:
            snapshot = self.catalog.read()
        except Exception as exc:  # keep serving: the catalog may be back at the next tick
            self._emit(
                ev.SchedulerEvent(
                    ev.ERROR, self.clock(), message=f"cannot read the catalog: {_one_line(exc)}"
                )
            )
            return []
        self._defs = snapshot.defs
        self.planner.observe(snapshot.views)
        busy = {n for c in cycles for n in c.component}
        new = self.planner.plan(now, busy)
        self.stats.cycles += len(new)
        return new

    def _next_plan_time(self, now: float, cycles: list[Cycle]) -> float:
        busy = {n for c in cycles for n in c.component}
        due = self.planner.next_due(now, busy)
        tick = now + self.config.tick
        return max(now + MIN_SLEEP, min(tick, due) if due is not None else tick)

    def _dispatch(
        self,
        cycles: list[Cycle],
        inflight: dict[Future[_Result], _Task],
        executor: ThreadPoolExecutor,
    ) -> None:
        """Start ready refreshes while workers are free (nothing queues in the pool, so
        a stop request never has queued refreshes to cancel)."""
        for cycle in cycles:
            for name in cycle.ready():
                if len(inflight) >= self.config.workers or self._stop.is_set():
                    return
                dt = self._defs.get(name)
                if dt is None:
                    cycle.start(name)
                    cycle.finish(name, NOT_RUN)
                    continue
                cycle.start(name)
                task = _Task(cycle, name, dt)
                last_try = self.planner.suspends_if_failed(name)
                inflight[executor.submit(self._refresh, dt, last_try)] = task

    def _refresh(self, dt: DynamicTableDef, suspends_if_failed: str | None) -> _Result:
        """Worker thread: one refresh, never raises. ``suspends_if_failed``: set for the
        last allowed failure, which the refresh itself turns into a suspension, so
        that its FAILED history row can say so."""
        started = self.clock()
        try:
            current = self.catalog.load(dt)
            if current is None:
                return _Result(NOT_RUN, started, self.clock(), message="dropped")
            if current.state != ACTIVE:
                return _Result(NOT_RUN, started, self.clock(), message="suspended")
            outcome = self.registry.refresher.refresh(
                current, SYSTEM_SCHEDULED, wait=False, suspends_if_failed=suspends_if_failed
            )
            return _Result(SUCCEEDED, started, self.clock(), outcome=outcome)
        except RefreshConflictError as exc:
            return _Result(BUSY, started, self.clock(), message=_one_line(exc))
        except Exception as exc:  # RefreshFailedError and anything unexpected
            suspended = getattr(exc, "suspended_reason", None)
            message = _one_line(exc)
            return _Result(FAILED, started, self.clock(), message=message, suspended=suspended)

    def _complete(self, task: _Task, future: Future[_Result]) -> None:
        result = future.result()
        cycle, name = task.cycle, task.name
        skips = cycle.finish(name, result.status)
        if result.status == SUCCEEDED:
            self._succeeded(task, result)
        elif result.status == FAILED:
            self._failed(task, result)
        elif result.status == BUSY:
            self.planner.attempted(name, result.started)
            self._emit(ev.SchedulerEvent(ev.BUSY, result.ended, name, message=result.message))
        for skip in skips:
            self.stats.skips += 1
            skipped = self._defs.get(skip.name)
            if skip.upstream_state == FAILED and skipped is not None:
                try:
                    self.catalog.record_skip(skipped, skip.message, result.ended)
                except Exception as exc:
                    self._emit(
                        ev.SchedulerEvent(ev.ERROR, self.clock(), skip.name, message=_one_line(exc))
                    )
            self._emit(ev.SchedulerEvent(ev.SKIPPED, result.ended, skip.name, message=skip.message))

    def _succeeded(self, task: _Task, result: _Result) -> None:
        outcome = result.outcome
        assert outcome is not None
        as_of = self.planner.succeeded(task.name, result.started)
        duration = result.ended - result.started
        interval = float(task.dt.interval_seconds) if task.dt.interval_seconds else None
        self.stats.refreshes += 1
        if outcome.refresh_mode == NO_DATA:
            self.stats.no_data += 1
        event = ev.SchedulerEvent(
            ev.REFRESHED,
            result.ended,
            task.name,
            mode=outcome.refresh_mode,
            rows_inserted=outcome.rows_inserted,
            rows_deleted=outcome.rows_deleted,
            started=result.started,
            duration_s=duration,
            interval_s=interval,
            lag_s=max(0.0, result.ended - as_of),
            as_of=as_of,
            reason=task.cycle.reasons.get(task.name),
            message=outcome.reason,
            job_id=outcome.job_id,
        )
        self.last[task.name] = event
        self._emit(event)
        if outcome.maintenance_error:
            self._emit(
                ev.SchedulerEvent(
                    ev.MAINTENANCE,
                    result.ended,
                    task.name,
                    message=f"the refresh committed; the maintenance after it failed "
                    f"(it is tried again after the next refresh): {outcome.maintenance_error}",
                    job_id=outcome.job_id,
                )
            )
        if interval is not None and duration > interval:
            last = self._warned.get(task.name)
            if last is None or result.ended - last >= self.config.backlog_warning_every:
                self._warned[task.name] = result.ended
                self._emit(
                    ev.SchedulerEvent(
                        ev.BACKLOG,
                        result.ended,
                        task.name,
                        duration_s=duration,
                        interval_s=interval,
                        message=(
                            f"refresh took {duration:.2f}s, longer than REFRESH INTERVAL {interval:g}s: "
                            "the interval is shorter than the refresh time, refreshes run back to back "
                            "(an interval of 1.5-2x the refresh time avoids the backlog)"
                        ),
                    )
                )

    def _failed(self, task: _Task, result: _Result) -> None:
        message = result.message or "unknown error"
        decision = self.planner.failed(task.name, result.started, result.ended, message)
        self.stats.failures += 1
        limit = self.config.policy.max_failures
        retry = "no retry: suspending" if decision.suspend else f"retry in {decision.retry_in:g}s"
        self._emit(
            ev.SchedulerEvent(
                ev.FAILED,
                result.ended,
                task.name,
                started=result.started,
                duration_s=result.ended - result.started,
                message=f"failure {decision.failures} of {limit} ({retry}): {message}",
            )
        )
        if result.suspended:  # the refresh suspended the table before its history row
            self.stats.suspensions += 1
            self._emit(
                ev.SchedulerEvent(ev.SUSPENDED, self.clock(), task.name, message=result.suspended)
            )
        elif decision.suspend and decision.suspend_reason:
            try:
                if self.catalog.suspend(task.dt, decision.suspend_reason):
                    self.stats.suspensions += 1
                    self._emit(
                        ev.SchedulerEvent(
                            ev.SUSPENDED, self.clock(), task.name, message=decision.suspend_reason
                        )
                    )
            except Exception as exc:
                self._emit(
                    ev.SchedulerEvent(
                        ev.ERROR,
                        self.clock(),
                        task.name,
                        message=f"cannot suspend: {_one_line(exc)}",
                    )
                )

    def _drain(self, inflight: dict[Future[_Result], _Task]) -> None:
        if not inflight:
            return
        names = ", ".join(sorted(t.name for t in inflight.values()))
        self._emit(
            ev.SchedulerEvent(ev.INFO, self.clock(), message=f"stopping: waiting for {names}")
        )
        done, pending = wait(list(inflight), timeout=self._drain_timeout)
        for future in done:
            self._complete(inflight.pop(future), future)
        if pending:
            self._clean = False
            left = ", ".join(sorted(inflight[f].name for f in pending))
            self._emit(
                ev.SchedulerEvent(
                    ev.INFO,
                    self.clock(),
                    message=f"stopped without waiting for {left}: it commits whole or not at all",
                )
            )

    def _emit(self, event: ev.SchedulerEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the scheduler
                pass


def _one_line(exc: BaseException) -> str:
    text = exc.one_line() if isinstance(exc, DynTablesError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:2000]
