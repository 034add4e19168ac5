"""The loop's threading, without Spark: an in-memory catalog and a refresher that sleeps.

Sub-second intervals and refresh times make a few seconds enough for hundreds of
refreshes, so the invariants (never two refreshes of a table at once, upstream before
downstream, nothing started after a stop) are checked under real concurrency.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from dyntables.catalog.definition import ACTIVE, SUSPENDED, DynamicTableDef
from dyntables.errors import RefreshConflictError, RefreshFailedError
from dyntables.refresh.runner import RefreshOutcome
from dyntables.scheduler import Policy, Scheduler, SchedulerConfig, SchedulerEvent
from dyntables.scheduler import events as ev
from dyntables.scheduler.catalog import Snapshot
from dyntables.scheduler.plan import TableView
from dyntables.sql.tokens import TableName


def qualified(table: str) -> TableName:
    return TableName(("cat", "ns", table))


@dataclass
class Table:
    dt: DynamicTableDef
    interval: float
    last_refresh: float | None = None


@dataclass
class FakeCatalog:
    """Definitions and committed refresh times in memory, like table properties."""

    tables: dict[str, Table] = field(default_factory=dict)
    skips: list[tuple[str, str]] = field(default_factory=list)
    suspended: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, table: str, *sources: str, interval: float = 0.2) -> None:
        dt = DynamicTableDef(
            name=qualified(table),
            dt_id=table,
            query="-",
            sources=tuple(qualified(s) for s in sources),
            interval_seconds=1,
        )
        self.tables[str(dt.name)] = Table(dt, interval)

    def read(self) -> Snapshot:
        with self.lock:
            views = [
                TableView(
                    name,
                    tuple(str(s) for s in t.dt.sources),
                    t.interval,
                    t.dt.state == ACTIVE,
                    t.last_refresh,
                )
                for name, t in self.tables.items()
            ]
            return Snapshot(views, {name: t.dt for name, t in self.tables.items()})

    def load(self, dt: DynamicTableDef) -> DynamicTableDef | None:
        with self.lock:
            table = self.tables.get(str(dt.name))
            return table.dt if table else None

    def set_state(self, table: str, state: str) -> None:
        with self.lock:
            t = self.tables[str(qualified(table))]
            t.dt = replace(t.dt, state=state)

    def suspend(self, dt: DynamicTableDef, reason: str) -> bool:
        self.set_state(dt.table, SUSPENDED)
        self.suspended.append((dt.table, reason))
        return True

    def record_skip(self, dt: DynamicTableDef, message: str, when: float) -> None:
        self.skips.append((dt.table, message))

    def committed(self, name: str, at: float) -> None:
        with self.lock:
            self.tables[name].last_refresh = at


@dataclass
class FakeRefresher:
    """Sleeps like a refresh, records (table, start, end), can fail or be busy."""

    catalog: FakeCatalog
    duration: tuple[float, float] = (0.01, 0.05)
    failing: set[str] = field(default_factory=set)
    busy: set[str] = field(default_factory=set)
    unmaintained: set[str] = field(default_factory=set)  # commit, then maintenance fails
    runs: list[tuple[str, float, float]] = field(default_factory=list)
    last_tries: list[tuple[str, str | None]] = field(default_factory=list)
    running: set[str] = field(default_factory=set)
    overlaps: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(
        self,
        dt: DynamicTableDef,
        trigger: str,
        *,
        wait: bool = True,
        suspends_if_failed: str | None = None,
    ) -> RefreshOutcome:
        assert trigger == "SYSTEM_SCHEDULED" and wait is False
        name = str(dt.name)
        self.last_tries.append((dt.table, suspends_if_failed))
        if dt.table in self.busy:
            raise RefreshConflictError(f"{name} is being refreshed right now")
        with self.lock:
            if name in self.running:
                self.overlaps.append(name)
            self.running.add(name)
        start = time.time()
        time.sleep(random.uniform(*self.duration))
        end = time.time()
        with self.lock:
            self.running.discard(name)
            self.runs.append((dt.table, start, end))
        if dt.table in self.failing:
            raise RefreshFailedError(f"refresh of {name} failed: boom")
        self.catalog.committed(name, end)
        error = "Catalog 'x' plugin class not found" if dt.table in self.unmaintained else None
        return RefreshOutcome(
            name,
            "SUCCEED",
            "INCREMENTAL",
            1,
            0,
            int((end - start) * 1000),
            "job",
            maintenance_error=error,
        )


def scheduler(
    catalog: FakeCatalog, refresher: FakeRefresher, events: list[SchedulerEvent], **config: object
) -> Scheduler:
    settings: dict[str, object] = {"workers": 4, "tick": 0.05, **config}
    registry = SimpleNamespace(refresher=refresher)
    return Scheduler(
        registry,  # type: ignore[arg-type]
        SchedulerConfig(**settings),  # type: ignore[arg-type]
        listeners=[events.append],
        catalog=catalog,  # type: ignore[arg-type]
    )


def diamond_and_chain() -> FakeCatalog:
    catalog = FakeCatalog()
    catalog.add("a", "base")
    catalog.add("b", "a")
    catalog.add("c", "a")
    catalog.add("d", "b", "c")
    catalog.add("x", "base2", interval=0.1)
    catalog.add("y", "x", interval=0.1)
    return catalog


def spans(runs: list[tuple[str, float, float]], table: str) -> list[tuple[float, float]]:
    return sorted((s, e) for t, s, e in runs if t == table)


def test_concurrent_loop_keeps_order_and_one_refresh_per_table() -> None:
    catalog = diamond_and_chain()
    refresher = FakeRefresher(catalog)
    events: list[SchedulerEvent] = []
    s = scheduler(catalog, refresher, events).start()
    time.sleep(3.0)
    assert s.stop(5)
    runs = list(refresher.runs)

    assert refresher.overlaps == []
    for table in "abcdxy":
        assert len(spans(runs, table)) >= 5, table
    # within a pipeline nothing overlaps: an upstream never refreshes under a downstream
    pipeline = sorted((s, e, t) for t, s, e in runs if t in "abcd")
    for (_, e1, t1), (s2, _, t2) in zip(pipeline, pipeline[1:], strict=False):
        if {t1, t2} != {"b", "c"}:  # the two sides of the diamond run side by side
            assert e1 <= s2 + 1e-3, (t1, t2)
    # d always runs after both sides of its cycle: b and c end before d starts
    for start, _ in spans(runs, "d"):
        last_b = max(e for s, e in spans(runs, "b") if s < start)
        last_c = max(e for s, e in spans(runs, "c") if s < start)
        assert last_b <= start and last_c <= start
    # the independent pipeline x -> y ran in parallel with the diamond at times
    assert any(
        s1 < e2 and s2 < e1
        for _, s1, e1 in (r for r in runs if r[0] in "xy")
        for _, s2, e2 in (r for r in runs if r[0] in "abcd")
    )
    assert all(e.kind == ev.REFRESHED for e in events if e.name)


def test_stop_waits_for_the_refresh_in_flight_and_starts_nothing_new() -> None:
    catalog = FakeCatalog()
    catalog.add("slow", "base", interval=0.05)
    catalog.add("after", "slow", interval=0.05)
    refresher = FakeRefresher(catalog, duration=(0.6, 0.6))
    events: list[SchedulerEvent] = []
    s = scheduler(catalog, refresher, events).start()
    deadline = time.time() + 5
    while not refresher.running and time.time() < deadline:
        time.sleep(0.01)
    asked = time.time()
    assert s.stop(5)  # waited: the refresh in flight finished
    assert not s.running
    assert refresher.running == set()
    assert all(start < asked for _, start, _ in refresher.runs)
    assert [r[0] for r in refresher.runs] == ["slow"]  # its downstream was not started


def test_failures_back_off_skip_downstream_then_suspend() -> None:
    catalog = FakeCatalog()
    catalog.add("f", "base", interval=0.05)
    catalog.add("g", "f", interval=0.05)
    refresher = FakeRefresher(catalog, failing={"f"})
    events: list[SchedulerEvent] = []
    policy = Policy(max_failures=3, backoff_base=0.1, backoff_cap=0.2)
    s = scheduler(catalog, refresher, events, policy=policy).start()
    deadline = time.time() + 5
    while not catalog.suspended and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    assert s.stop(5)

    f_runs = spans(refresher.runs, "f")
    assert len(f_runs) == 3  # then suspended: no fourth attempt
    gaps = [later[0] - earlier[1] for earlier, later in zip(f_runs, f_runs[1:], strict=False)]
    assert gaps[0] >= 0.1 - 0.01 and gaps[1] >= 0.2 - 0.01  # 0.1 s, then 0.2 s (capped)
    ((table, reason),) = catalog.suspended
    assert table == "f" and reason.startswith("suspended after 3 consecutive refresh failures")
    # only the third try is told it is the last (a real refresh then suspends the table
    # itself, before its history row; this fake does not, so the scheduler does)
    assert [t for n, t in refresher.last_tries if n == "f"] == [
        None,
        None,
        "suspended after 3 consecutive refresh failures",
    ]
    assert "boom" in reason
    # g is skipped in each cycle where f failed, recorded with the root cause...
    assert catalog.skips == [("g", "skipped: upstream cat.ns.f failed")] * 3
    # ...and refreshes on its own interval in between (reading f's committed data)
    assert spans(refresher.runs, "g")
    kinds = [e.kind for e in events if e.name == "cat.ns.f"]
    assert kinds.count(ev.FAILED) == 3 and kinds[-1] == ev.SUSPENDED


def test_busy_elsewhere_is_no_failure() -> None:
    catalog = FakeCatalog()
    catalog.add("b", "base", interval=0.05)
    catalog.add("down", "b", interval=0.05)
    refresher = FakeRefresher(catalog, busy={"b"})
    events: list[SchedulerEvent] = []
    s = scheduler(catalog, refresher, events, policy=Policy(max_failures=1)).start()
    time.sleep(0.5)
    assert s.stop(5)
    assert catalog.suspended == [] and catalog.skips == []
    assert any(e.kind == ev.BUSY for e in events)
    assert all(e.kind != ev.FAILED for e in events)


def test_a_failed_maintenance_is_a_warning_not_a_failure() -> None:
    """The refresh committed; its compaction or expiry failed after. Said once per
    refresh (the demo's compactions failed for weeks with only a stats key to show it),
    and nothing backs off, skips or suspends."""
    catalog = FakeCatalog()
    catalog.add("m", "base", interval=0.05)
    catalog.add("down", "m", interval=0.05)
    refresher = FakeRefresher(catalog, unmaintained={"m"})
    events: list[SchedulerEvent] = []
    s = scheduler(catalog, refresher, events, policy=Policy(max_failures=1)).start()
    time.sleep(0.5)
    assert s.stop(5)
    kinds = [e.kind for e in events if e.name == "cat.ns.m"]
    assert kinds.count(ev.REFRESHED) >= 2
    assert kinds.count(ev.MAINTENANCE) == kinds.count(ev.REFRESHED)
    warning = next(e for e in events if e.kind == ev.MAINTENANCE)
    assert "plugin class not found" in ev.format_event(warning)
    assert all(e.kind == ev.REFRESHED for e in events if e.name == "cat.ns.down")
    assert catalog.suspended == [] and catalog.skips == []


def test_suspend_is_honoured_right_before_a_refresh_starts() -> None:
    catalog = FakeCatalog()
    catalog.add("a", "base", interval=0.05)
    refresher = FakeRefresher(catalog)
    events: list[SchedulerEvent] = []
    s = scheduler(catalog, refresher, events, tick=10.0).start()  # no re-read by the tick
    time.sleep(0.3)
    catalog.set_state("a", SUSPENDED)
    suspended = time.time()
    time.sleep(0.5)
    assert s.stop(5)
    assert all(start < suspended for _, start, _ in refresher.runs)
