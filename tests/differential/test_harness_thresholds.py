"""The harness's hold on apply's size thresholds (pure threading, no Spark)."""

from __future__ import annotations

import threading

from dyntables.refresh import apply
from tests.differential.harness import _thresholds_of


def _now() -> tuple[int, int, int]:
    return (apply.SINGLE_JOB_MAX_ROWS, apply.REWRITE_MAX_ROWS, apply.OVERWRITE_FILES_PER_VALUE)


def test_one_large_scenario_at_a_time_and_the_values_come_back() -> None:
    """A second large scenario waits for the first: entered while the first held the
    thresholds changed, it saved those as "before" and put them back last."""
    before = _now()
    second_done = threading.Event()
    seen: list[tuple[int, int, int]] = []

    def second() -> None:
        with _thresholds_of(1):
            seen.append(_now())
        second_done.set()

    with _thresholds_of(2):
        assert _now() == (0, 0, 1_000_000)
        thread = threading.Thread(target=second)
        thread.start()
        assert not second_done.wait(0.3), "a second large scenario ran beside the first"
    thread.join(10)
    assert second_done.is_set()
    assert seen == [(0, 0, before[2])]
    assert _now() == before


def test_a_scenario_that_is_not_large_changes_nothing() -> None:
    before = _now()
    with _thresholds_of(0):
        assert _now() == before
    assert _now() == before
