"""The scheduler's log lines and the NO_DATA folding: pure, no Spark."""

from __future__ import annotations

import logging

import pytest

from dyntables.scheduler import events as ev


def _refreshed(name: str, at: float, mode: str = "NO_DATA", message: str | None = None):
    return ev.SchedulerEvent(ev.REFRESHED, at, name, mode=mode, duration_s=0.02, message=message)


def test_quiet_tables_are_summed_up_once_a_minute() -> None:
    """Three 1-second tables over quiet sources wrote three lines a second."""
    seen: list[ev.SchedulerEvent] = []
    folded = ev.NoDataFolded(seen.append, every=60.0)
    for second in range(61):
        for name in ("a", "b", "c"):
            folded(_refreshed(name, 1000.0 + second))
    assert [e.kind for e in seen] == [ev.INFO]
    assert (
        seen[0].message == "181 NO_DATA refreshes of 3 tables in 60s: nothing new in their sources"
    )
    folded.flush(1062.0)  # the service's last word: b and c at second 60
    assert seen[1].message == "2 NO_DATA refreshes of 2 tables in 2s: nothing new in their sources"
    folded.flush(1063.0)
    assert len(seen) == 2


def test_refreshes_that_did_something_or_say_something_pass_at_once() -> None:
    seen: list[ev.SchedulerEvent] = []
    folded = ev.NoDataFolded(seen.append)
    folded(_refreshed("a", 1.0))
    work = _refreshed("a", 2.0, mode="INCREMENTAL")
    dropped = _refreshed("b", 3.0, message="source cat.ns.src was dropped")
    failed = ev.SchedulerEvent(ev.FAILED, 4.0, "c", message="boom")
    for event in (work, dropped, failed):
        folded(event)
    assert seen == [work, dropped, failed]
    folded.flush(5.0)
    assert seen[-1].message == "1 NO_DATA refresh of 1 table in 4s: nothing new in their sources"


def test_the_count_is_not_held_back_by_refreshes_that_did_something() -> None:
    seen: list[ev.SchedulerEvent] = []
    folded = ev.NoDataFolded(seen.append, every=60.0)
    folded(_refreshed("quiet", 0.0))
    busy = [_refreshed("busy", float(t), mode="INCREMENTAL") for t in (30, 61)]
    for event in busy:
        folded(event)
    assert [e.kind for e in seen] == [ev.REFRESHED, ev.INFO, ev.REFRESHED]
    assert seen[1].message and seen[1].message.startswith("1 NO_DATA refresh of 1 table in 61s")


def test_a_refresh_line_says_why_when_there_is_a_reason() -> None:
    line = ev.format_event(_refreshed("cat.ns.t", 0.0, mode="FULL", message="SOURCE_REPLACED"))
    assert line.endswith("FULL  +0/-0 rows  0.02s  lag -  (SOURCE_REPLACED)")
    assert ev.format_event(_refreshed("cat.ns.t", 0.0)).endswith("lag -")


def test_plain_no_data_is_debug_in_the_background_log(caplog: pytest.LogCaptureFixture) -> None:
    listen = ev.logging_listener(logging.getLogger("test.scheduler"))
    with caplog.at_level(logging.DEBUG, logger="test.scheduler"):
        listen(_refreshed("a", 0.0))
        listen(_refreshed("a", 1.0, mode="INCREMENTAL"))
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.INFO]
