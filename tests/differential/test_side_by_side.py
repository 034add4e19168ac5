"""The quick profile's scheduling of scenarios on two threads (pure: fake runs)."""

from __future__ import annotations

import threading
import time

from tests.differential.generate import Scenario, Step
from tests.differential.harness import Result, Stats
from tests.differential.test_differential import _run_side_by_side, sets_session


def _scenario(name: str, *sql: str) -> Scenario:
    return Scenario(name, [Step("sql", (text,)) for text in sql])


def test_a_scenario_that_sets_the_session_runs_alone() -> None:
    runs = [
        ("a", _scenario("a", "CREATE TABLE t0 (k INT)")),
        ("set", _scenario("set", "SET spark.sql.ansi.enabled = true", "CREATE TABLE t0 (k INT)")),
        ("b", _scenario("b", "INSERT INTO t0 VALUES (1)")),
        ("c", _scenario("c", "INSERT INTO t0 VALUES (2)")),
        ("reset", _scenario("reset", "  reset spark.sql.ansi.enabled")),
    ]
    guard = threading.Lock()
    in_flight: set[str] = set()
    beside: dict[str, set[str]] = {key: set() for key, _ in runs}

    def run(item: tuple[str, Scenario]) -> tuple[str, Stats, Result]:
        key = item[0]
        with guard:
            for other in in_flight:
                beside[key].add(other)
                beside[other].add(key)
            in_flight.add(key)
        time.sleep(0.05)
        with guard:
            in_flight.discard(key)
        return key, Stats(), Result(item[1], {})

    done = _run_side_by_side(runs, run, 2)

    assert sorted(key for key, _, _ in done) == ["a", "b", "c", "reset", "set"]
    assert beside["set"] == set() and beside["reset"] == set()
    assert beside["a"] & {"b", "c"}, "the others still run two at a time"


def test_only_set_and_reset_statements_count() -> None:
    assert sets_session(_scenario("x", "SET spark.sql.ansi.enabled = true"))
    assert not sets_session(_scenario("x", "UPDATE t0 SET v = 1"))
    assert not sets_session(_scenario("x", "CREATE TABLE settings (k INT)"))
