"""The scheduler loop for real, on small pipelines in the shared Spark session.

Every test scopes its scheduler to a namespace of its own, so other tests' dynamic
tables are never touched. Refreshes cost seconds here: waits are generous and every
check is on order and outcome, never on exact timing.
"""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.cli.main import main
from dyntables.scheduler import Policy, Scheduler, SchedulerConfig, SchedulerEvent
from dyntables.scheduler import events as ev
from dyntables.scheduler.service import serve
from tests.cli.fakes import BorrowedLakehouse

WAIT = 90.0  # seconds: a refresh costs 1-7 s on a small machine, a cycle several


class Events:
    """A listener that keeps every event and lets a test wait for one."""

    def __init__(self) -> None:
        self.items: list[SchedulerEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: SchedulerEvent) -> None:
        with self._changed:
            self.items.append(event)
            self._changed.notify_all()

    def wait_for(
        self, predicate: Callable[[SchedulerEvent], bool], timeout: float = WAIT
    ) -> SchedulerEvent:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self.items:
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    kinds = [(e.kind, e.name.split(".")[-1], e.mode) for e in self.items]
                    raise AssertionError(f"no such event within {timeout}s; saw {kinds}")
                self._changed.wait(left)

    def refreshes(self, table: str) -> list[SchedulerEvent]:
        return [e for e in self.items if e.kind == ev.REFRESHED and e.name.endswith("." + table)]


@dataclass
class Diamond:
    """src -> a -> (b, c) -> d."""

    lh: Lakehouse
    ns: str

    def name(self, table: str) -> str:
        return f"{self.lh.catalog}.{self.ns}.{table}"

    def scheduler(self, events: Events, **config: object) -> Scheduler:
        settings: dict[str, object] = {
            "workers": 2,
            "tick": 0.5,
            "namespaces": (self.ns,),
            **config,
        }
        return Scheduler(self.lh.commands.registry, SchedulerConfig(**settings), listeners=[events])  # type: ignore[arg-type]

    def count(self, table: str) -> int:
        return int(self.lh.sql(f"SELECT count(*) FROM {self.ns}.{table}").first()[0])


def _is(table: str, *, kind: str = ev.REFRESHED, mode: str | None = None, after: float = 0.0):  # type: ignore[no-untyped-def]
    def match(e: SchedulerEvent) -> bool:
        return (
            e.kind == kind
            and e.name.endswith("." + table)
            and (mode is None or e.mode == mode)
            and (e.started or e.time) >= after
        )

    return match


@pytest.fixture(scope="module")
def diamond(lh: Lakehouse) -> Iterator[Diamond]:
    ns = f"sched_diamond_{os.getpid()}"
    lh.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    lh.sql(
        f"""
        CREATE TABLE {ns}.src (k STRING, v INT);
        INSERT INTO {ns}.src VALUES ('a', 1), ('b', 2);
        CREATE DYNAMIC TABLE {ns}.a REFRESH INTERVAL 1 SECOND AS SELECT k, v FROM {ns}.src WHERE v > 0;
        CREATE DYNAMIC TABLE {ns}.b REFRESH INTERVAL 1 SECOND AS SELECT k, v FROM {ns}.a WHERE v < 1000;
        CREATE DYNAMIC TABLE {ns}.c REFRESH INTERVAL 1 SECOND AS SELECT k, v FROM {ns}.a WHERE v > 0;
        CREATE DYNAMIC TABLE {ns}.d REFRESH INTERVAL 1 SECOND AS
          SELECT k, v FROM {ns}.b UNION ALL SELECT k, v FROM {ns}.c
        """
    )
    yield Diamond(lh, ns)


def _history(lh: Lakehouse, ns: str, table: str) -> list:  # type: ignore[type-arg]
    return lh.sql(
        f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE schema_name = '{ns}' AND name = '{table}'"
    ).collect()


def test_diamond_refreshes_in_order_each_table_one_at_a_time(diamond: Diamond) -> None:
    events = Events()
    diamond.lh.sql(f"INSERT INTO {diamond.ns}.src VALUES ('new', 7)")
    inserted = time.time()
    scheduler = diamond.scheduler(events).start()
    try:
        d = events.wait_for(_is("d", mode="INCREMENTAL", after=inserted))
    finally:
        assert scheduler.stop(60)

    # the cycle that carried the new row: a, then b and c, then d (never between b and c)
    a = events.wait_for(_is("a", mode="INCREMENTAL", after=inserted))
    b = events.wait_for(_is("b", mode="INCREMENTAL", after=inserted))
    c = events.wait_for(_is("c", mode="INCREMENTAL", after=inserted))
    assert (
        a.started is not None
        and b.started is not None
        and c.started is not None
        and d.started is not None
    )
    assert a.time <= b.started and a.time <= c.started
    assert d.started >= max(b.time, c.time)
    assert d.rows_inserted == 2  # the new row through both sides
    assert d.lag_s is not None and d.lag_s >= d.time - a.started - 0.01  # lag spans the chain
    assert diamond.count("d") == 2 * diamond.count("a")

    # never two refreshes of one table at once: the runner's own history times agree
    for table in "abcd":
        spans = sorted(
            (r.start_time, r.end_time)
            for r in _history(diamond.lh, diamond.ns, table)
            if r.refresh_trigger == "SYSTEM_SCHEDULED"
        )
        assert spans, table
        assert all(
            prev_end <= start for (_, prev_end), (start, _) in zip(spans, spans[1:], strict=False)
        )


def test_suspend_and_resume_are_honoured_by_a_running_scheduler(diamond: Diamond) -> None:
    events = Events()
    scheduler = diamond.scheduler(events).start()
    try:
        diamond.lh.sql(f"ALTER DYNAMIC TABLE {diamond.ns}.b SUSPEND")
        suspended = time.time()
        diamond.lh.sql(f"INSERT INTO {diamond.ns}.src VALUES ('while_suspended', 8)")
        inserted = time.time()
        events.wait_for(_is("d", mode="INCREMENTAL", after=inserted))
        assert [e for e in events.refreshes("b") if (e.started or 0) > suspended] == []
        assert diamond.count("b") < diamond.count("a")  # b still misses the new row

        diamond.lh.sql(f"ALTER DYNAMIC TABLE {diamond.ns}.b RESUME")
        resumed = time.time()
        events.wait_for(_is("b", mode="INCREMENTAL", after=resumed))
        events.wait_for(_is("d", after=resumed + 0.01))
    finally:
        assert scheduler.stop(60)
    assert diamond.count("b") == diamond.count("a")


def test_cli_scheduler_resumes_from_the_committed_state_and_stops_on_sigterm(
    diamond: Diamond, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new scheduler (a restart: no memory) picks up a row written while none ran."""
    borrowed = BorrowedLakehouse(diamond.lh)
    diamond.lh.sql(f"INSERT INTO {diamond.ns}.src VALUES ('cli', 10)")
    inserted_ms = int(time.time() * 1000)
    done = threading.Event()

    def terminate_once_a_refreshed() -> None:
        """SIGTERM as soon as table d committed the new row (metadata polling only)."""
        deadline = time.monotonic() + WAIT
        while not done.is_set() and time.monotonic() < deadline:
            table = load_table(diamond.lh.spark, diamond.lh.qualify(f"{diamond.ns}.d"))
            state = RefreshState.from_properties(table.properties()) if table else None
            if state is not None and state.time_ms > inserted_ms:
                break
            time.sleep(0.2)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=terminate_once_a_refreshed, daemon=True)
    watcher.start()
    try:
        code = main(
            ["scheduler", "--namespace", diamond.ns, "--workers", "2", "--tick", "0.5"],
            lakehouse_factory=borrowed.factory,
        )
    finally:
        done.set()
        watcher.join()
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert "scheduler started" in lines[0]
    assert any("SIGTERM: stopping after the refreshes in flight" in line for line in lines)
    assert "scheduler stopped" in lines[-1]
    refresh_lines = [line for line in lines if " REFRESH " in line]
    assert refresh_lines, out
    # time, table, mode, rows, duration, lag
    assert any(
        f"{diamond.ns}.a  INCREMENTAL  +1/-0 rows" in line and " lag " in line
        for line in refresh_lines
    ), out
    assert any(f"{diamond.ns}.d  INCREMENTAL  +2/-0 rows" in line for line in refresh_lines), out
    assert borrowed.closed
    assert diamond.count("d") == 2 * diamond.count("a")


def test_failures_back_off_skip_downstream_and_suspend(
    lh: Lakehouse, unique: Callable[[str], str]
) -> None:
    ns = unique("sched_fail")
    lh.sql(
        f"""
        CREATE NAMESPACE {ns};
        CREATE TABLE {ns}.src (k STRING, v INT);
        INSERT INTO {ns}.src VALUES ('a', 1);
        CREATE DYNAMIC TABLE {ns}.f REFRESH INTERVAL 1 SECOND AS SELECT k, v FROM {ns}.src;
        CREATE DYNAMIC TABLE {ns}.g REFRESH INTERVAL 1 SECOND AS SELECT k FROM {ns}.f
        """
    )
    # the source loses a column the query needs: every refresh of f now fails
    lh.sql(f"ALTER TABLE {ns}.src DROP COLUMN v")
    lh.sql(f"INSERT INTO {ns}.src VALUES ('b')")
    events = Events()
    config = SchedulerConfig(
        workers=2,
        tick=0.5,
        namespaces=(ns,),
        policy=Policy(max_failures=3, backoff_base=0.5, backoff_cap=2.0),
    )
    scheduler = Scheduler(lh.commands.registry, config, listeners=[events]).start()
    try:
        suspended = events.wait_for(_is("f", kind=ev.SUSPENDED))
        time.sleep(2.0)  # a suspended table is left alone
    finally:
        assert scheduler.stop(60)

    failures = [e for e in events.items if e.kind == ev.FAILED]
    assert [e.message.split(" (")[0] for e in failures if e.message] == [
        "failure 1 of 3",
        "failure 2 of 3",
        "failure 3 of 3",
    ]
    starts = [e.started or 0.0 for e in failures]
    ends = [e.time for e in failures]
    assert (
        starts[1] - ends[0] >= 0.5 - 0.05 and starts[2] - ends[1] >= 1.0 - 0.05
    )  # backoff 0.5 s, 1 s
    assert (
        suspended.message is not None
        and "suspended after 3 consecutive refresh failures" in suspended.message
    )
    assert all(e.time <= suspended.time for e in events.items if e.kind == ev.FAILED)

    dt = lh.commands.registry.get(lh.qualify(f"{ns}.f"))
    assert dt.state == "SUSPENDED"
    assert dt.suspended_reason is not None and dt.suspended_reason.startswith(
        "suspended after 3 consecutive"
    )

    f_history = [r for r in _history(lh, ns, "f") if r.refresh_trigger == "SYSTEM_SCHEDULED"]
    assert [r.state for r in f_history] == ["FAILED"] * 3
    assert all(r.error_message for r in f_history)
    # the failure that suspended the table says so in its row (the seeds' suspended_reason)
    reasons = [r.suspended_reason for r in f_history]  # newest first
    assert reasons[1:] == [None, None] and reasons[0] == dt.suspended_reason
    g_history = [r for r in _history(lh, ns, "g") if r.refresh_trigger == "SYSTEM_SCHEDULED"]
    skipped = [r for r in g_history if r.state == "QUEUED"]
    assert len(skipped) == 3
    assert {r.error_message for r in skipped} == {f"skipped: upstream {lh.catalog}.{ns}.f failed"}
    assert {r.refresh_mode for r in skipped} == {"NO_DATA"}


def test_one_cycle_exits_non_zero_when_a_refresh_failed(
    lh: Lakehouse, unique: Callable[[str], str]
) -> None:
    """``scheduler --once`` is how cron runs it: it exited 0 with every refresh failed."""
    ns = unique("sched_once")
    lh.sql(
        f"""
        CREATE NAMESPACE {ns};
        CREATE TABLE {ns}.src (k STRING, v INT);
        INSERT INTO {ns}.src VALUES ('a', 1);
        CREATE DYNAMIC TABLE {ns}.ok REFRESH INTERVAL 1 SECOND AS SELECT k FROM {ns}.src;
        CREATE DYNAMIC TABLE {ns}.bad REFRESH INTERVAL 1 SECOND AS SELECT k, v FROM {ns}.src
        """
    )
    lh.sql(f"ALTER TABLE {ns}.src DROP COLUMN v; INSERT INTO {ns}.src VALUES ('b')")
    time.sleep(1.1)  # both are due
    out = io.StringIO()
    one = SchedulerConfig(tables=(str(lh.qualify(f"{ns}.ok")),))
    assert serve(lh, one, out=out, once=True) == 0
    both = SchedulerConfig(namespaces=(ns,))
    assert serve(lh, both, out=out, once=True) == 1
    assert "1 failed" in out.getvalue()


def test_a_scope_naming_a_namespace_the_catalog_lacks_is_an_error(
    lh: Lakehouse, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in --namespace started a scheduler that refreshed nothing and said
    nothing; a namespace written back-quoted (`my-ns`) was looked up quoted twice."""
    ns = unique("sched_scope")
    lh.sql(f"CREATE NAMESPACE `{ns}-x`")
    code = main(
        ["scheduler", "--namespace", f"{ns}_typo", "--once"],
        lakehouse_factory=BorrowedLakehouse(lh).factory,
    )
    err = capsys.readouterr().err
    assert code != 0
    assert f"namespace {lh.catalog}.{ns}_typo not found" in err
    config = SchedulerConfig(namespaces=(f"`{ns}-x`",))
    scheduler = Scheduler(lh.commands.registry, config)
    assert scheduler.catalog.namespaces == (f"{ns}-x",)
