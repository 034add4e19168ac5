"""The quick differential profile (runs in ``make test``, about 3 minutes on 2 idle
cores): three generated scenarios of fixed seeds covering every query shape; hypothesis
examples; injected failures at the hardest fault points; and the regression corpus
(``scenarios/*.scn``, known bugs as strict xfails).

``slow`` (``make test-all``): a failure at every fault point in turn, and real process
kills (a subprocess with its own Spark).

Every refresh is checked against the oracle (``harness.py``). The long profile is
``python -m tests.differential.fuzz`` (``make fuzz``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from dyntables.catalog.iceberg import load_table
from dyntables.refresh import apply, faults
from tests.differential import conftest
from tests.differential.generate import (
    Scenario,
    parse_scenario,
    quick_scenarios,
    scenarios,
)
from tests.differential.harness import Harness, Result, Stats, as_if_large, compacting_from

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).with_name("scenarios")


def _assert_ok(result) -> None:  # type: ignore[no-untyped-def]
    assert result.ok, "\n" + result.report()


QUICK = {sc.shape: sc for sc in quick_scenarios()}
# Scenarios of the quick profile run this many at a time (each with its own harness): a
# refresh of tiny tables is mostly driver-side latency (planning, py4j, commits), so two
# in flight keep two cores busy. 1 runs them one by one.
THREADS = int(os.environ.get("DYNTABLES_DIFFERENTIAL_THREADS", "2"))


@pytest.fixture(scope="session")
def quick_results(lh) -> dict[str, Result]:  # type: ignore[no-untyped-def]
    """Results of the generated quick scenarios and the regression corpus, run up front
    ``THREADS`` at a time; the tests below report them one by one."""
    runs: list[tuple[str, Scenario]] = [(f"generated:{k}", sc) for k, sc in QUICK.items()]
    for path in sorted(CORPUS.glob("*.scn")):
        scenario = parse_scenario(path.read_text(), path.stem)
        if not scenario.slow:
            runs.append((f"corpus:{path.stem}", scenario))

    def run(item: tuple[str, Scenario]) -> tuple[str, Stats, Result]:
        stats = Stats()
        # the generated scenarios name their tables `t0-<run>`, which Spark reads only
        # back-quoted: every path of a refresh must write names so (the corpus keeps
        # plain names, unless DYNTABLES_TEST_QUOTED_NAMES is set)
        quoted = item[0].startswith("generated:") or None
        harness = Harness(lh, stats, quoted_names=quoted)
        return item[0], stats, harness.run(item[1])

    # the dynamic tables compact their own files from 2 (not 64), from these threads as
    # from the scheduler's (a compaction from a thread of its own failed, session 44)
    with compacting_from(2):
        done = _run_side_by_side(runs, run, max(1, THREADS))
    results: dict[str, Result] = {}
    for key, stats, result in done:
        conftest.TIMES.append((result.seconds, key))
        if result.scenario.bug:  # a known bug: its failures are not new mismatches of this run
            conftest.STATS.known_bugs += 0 if result.ok else 1
        else:
            conftest.STATS.merge(stats)
        results[key] = result
    return results


def sets_session(scenario: Scenario) -> bool:
    """Whether the scenario SETs a session setting. The scenarios share one session:
    another's end put back the settings it started with (harness._settings_kept),
    unsetting this one's SET spark.sql.ansi.enabled between its SET and its CREATE,
    whose table then recorded ANSI off and never met the overflow the scenario expects
    (CI, session 28); and its SET would change what the other's tables record."""
    return any(
        step.op == "sql" and re.match(r"\s*(SET|RESET)\b", step.args[0], re.I)
        for step in scenario.steps
    )


def _run_side_by_side(
    runs: list[tuple[str, Scenario]],
    run: Callable[[tuple[str, Scenario]], tuple[str, Stats, Result]],
    threads: int,
) -> list[tuple[str, Stats, Result]]:
    """``run`` over ``runs``, ``threads`` at a time, in order, except that:

    - a scenario that sets_session runs alone, after the others it would run beside;
    - a thread takes the next scenario not applied "as if large" while another thread
      runs one that is: those hold apply's thresholds for their whole run, so two side
      by side would leave one thread waiting for the other's whole scenario."""
    pending = list(runs)
    turn = threading.Condition()
    running = large_running = alone_running = 0
    done: list[tuple[str, Stats, Result]] = []

    def take() -> int | None:
        """The index in ``pending`` to run now; None: wait for a running one to end."""
        if alone_running:
            return None
        shared = [j for j, (_, sc) in enumerate(pending) if not sets_session(sc)]
        if not shared:
            return None if running else 0
        return next(
            (j for j in shared if not (large_running and as_if_large(pending[j][1]))), shared[0]
        )

    def worker() -> None:
        nonlocal running, large_running, alone_running
        while True:
            with turn:
                while pending and (i := take()) is None:
                    turn.wait()
                if not pending:
                    return
                item = pending.pop(i)
                large = 1 if as_if_large(item[1]) else 0
                alone = 1 if sets_session(item[1]) else 0
                running, large_running, alone_running = (
                    running + 1,
                    large_running + large,
                    alone_running + alone,
                )
            try:
                out = run(item)
            finally:
                with turn:
                    running, large_running, alone_running = (
                        running - 1,
                        large_running - large,
                        alone_running - alone,
                    )
                    turn.notify_all()
            with turn:
                done.append(out)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(worker) for _ in range(threads)]:
            future.result()
    return done


@pytest.mark.parametrize("group", list(QUICK))
def test_generated_scenario(quick_results: dict[str, Result], group: str) -> None:
    """Every query shape once: three generated scenarios of fixed seeds, each with one
    dynamic table per shape over shared tables (replay with ``python -m
    tests.differential.fuzz --quick``)."""
    _assert_ok(quick_results[f"generated:{group}"])


# apply's size thresholds as the package sets them, read before any scenario runs
THRESHOLDS = (apply.SINGLE_JOB_MAX_ROWS, apply.REWRITE_MAX_ROWS, apply.OVERWRITE_FILES_PER_VALUE)


def test_thresholds_are_restored_after_concurrent_scenarios(
    quick_results: dict[str, Result],
) -> None:
    """Scenarios that apply deltas as to a large table change apply's thresholds while
    they run, two scenarios at a time; afterwards every later test must see the package's
    own values (interleaved, they once left "every table is too large to rewrite")."""
    assert any(r.ok for r in quick_results.values())
    now = (apply.SINGLE_JOB_MAX_ROWS, apply.REWRITE_MAX_ROWS, apply.OVERWRITE_FILES_PER_VALUE)
    assert now == THRESHOLDS


@settings(
    max_examples=1,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(scenario=scenarios(batches=(1, 2)))
def test_hypothesis_scenarios(harness: Harness, scenario: Scenario) -> None:
    _assert_ok(harness.run(scenario))


# -- faults ------------------------------------------------------------------------------------

FAULT_SETUP = """
CREATE TABLE t0 (k INT, s STRING, x DOUBLE);
INSERT INTO t0 VALUES (1, 'a', 1.5), (1, 'b', 2.0), (2, 'c', NULL), (NULL, 'd', 0.1), (3, 'a', 2.5);
CREATE TABLE t1 (k INT, n INT);
INSERT INTO t1 VALUES (1, 10), (2, 20), (2, 21), (3, NULL);
"""
# an aggregate over a join: state tables, MIN recomputation, join deltas
FAULT_QUERY_INCREMENTAL = (
    "SELECT l0.k AS c0, COUNT(*) AS c1, SUM(l1.n) AS c2, MIN(l0.s) AS c3, AVG(l0.x) AS c4 "
    "FROM t0 AS l0 JOIN t1 AS l1 ON l0.k = l1.k GROUP BY l0.k"
)
# outside the grammar (a FULL JOIN needs an equality): every refresh is FULL
FAULT_QUERY_FULL = (
    "SELECT l0.k AS c0, BOOL_OR(l1.n > 15) AS c1, COUNT(DISTINCT l1.n) AS c2 "
    "FROM t0 AS l0 FULL JOIN t1 AS l1 ON l0.k < l1.k GROUP BY ROLLUP(l0.k)"
)
# one batch of changes before each injected failure (deletes the current MIN, moves join partners...)
FAULT_BATCHES = [
    "DELETE FROM t0 WHERE s = (SELECT MIN(s) FROM t0)",
    "UPDATE t1 SET k = 3 WHERE n = 21",
    "INSERT INTO t0 VALUES (2, 'e', 4.0), (NULL, NULL, NULL)",
    "MERGE INTO t1 AS tgt USING (SELECT * FROM VALUES (1, 11), (4, 40) AS v(k, n)) AS src ON tgt.k = src.k "
    "WHEN MATCHED THEN UPDATE SET tgt.n = src.n WHEN NOT MATCHED THEN INSERT (k, n) VALUES (src.k, src.n)",
    "DELETE FROM t0 WHERE k = 2",
    "INSERT INTO t0 VALUES (1, 'a', 1.5), (4, 'z', -1.0)",
    "UPDATE t0 SET s = 'A' WHERE s = 'a'",
]


def fault_scenario(
    query: str, points: list[str], twin: bool = False, full_points: tuple[str, ...] = ()
) -> Scenario:
    """Changes, a refresh failing at each point in turn, then a refresh that must recover:
    nothing lost, nothing applied twice. A twin refreshed only once at the end must agree.
    ``full_points``: also fail a FULL-only dynamic table (df0) at these points."""
    lines = [FAULT_SETUP, f"CREATE DYNAMIC TABLE dt0 AS {query};"]
    if twin:
        lines.append(f"CREATE DYNAMIC TABLE tw0 AS {query};")
    if full_points:
        lines.append(f"CREATE DYNAMIC TABLE df0 AS {FAULT_QUERY_FULL};")
    for i, point in enumerate(points):
        lines += [
            FAULT_BATCHES[i % len(FAULT_BATCHES)] + ";",
            f"@fault dt0 {point};",
            "REFRESH DYNAMIC TABLE dt0;",
        ]
        if i < len(full_points):
            lines += [f"@fault df0 {full_points[i]};", "REFRESH DYNAMIC TABLE df0;"]
    lines += [
        "@no_data dt0;",
        "@refresh_full dt0;",
    ]  # nothing changed: a forced FULL keeps the contents
    if twin:
        lines += ["REFRESH DYNAMIC TABLE tw0;", "@same dt0 tw0;"]
    return parse_scenario("\n".join(lines), "faults")


def _failed_at(result, dt: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        r.reason
        for name, r in result.records
        if name == dt and r.kind == "fault" and r.mode == "FAILED"
    ]


def test_injected_faults_then_recovery(harness: Harness) -> None:
    """The quick profile's faults: an incremental refresh failing with its aggregate state
    published but not the table (the hardest recovery), and a FULL refresh failing after
    its write. Every point, for two simpler queries, is in
    ``tests/refresh/test_crash_safety.py``; every point for this query is ``slow``."""
    points = ["after_publish_state"]
    scenario = fault_scenario(FAULT_QUERY_INCREMENTAL, points, full_points=("after_write",))
    scenario.steps = [s for s in scenario.steps if s.op != "refresh_full"]  # in the slow one
    result = harness.run(scenario)
    _assert_ok(result)
    assert _failed_at(result, "dt0") == points, "a fault point was not reached"
    assert _failed_at(result, "df0") == ["after_write"], "a fault point was not reached"
    assert {r.mode for name, r in result.records if name == "df0" and r.kind == "refresh"} == {
        "FULL"
    }, "df0 must exercise the FULL path"
    recoveries = [r.mode for name, r in result.records if name == "dt0" and r.kind == "refresh"]
    assert recoveries == ["INCREMENTAL"], recoveries


@pytest.mark.slow  # ~25 refreshes
def test_injected_fault_at_every_point_then_recovery(harness: Harness) -> None:
    """A refresh fails at every fault point in turn (an incremental aggregate over a join,
    and a FULL-only table at the points of the FULL path); each next refresh recovers."""
    points = list(faults.POINTS)
    full_points = ("after_write", "after_publish_state")
    result = harness.run(
        fault_scenario(FAULT_QUERY_INCREMENTAL, points, twin=True, full_points=full_points)
    )
    _assert_ok(result)
    assert _failed_at(result, "dt0") == points, "a fault point was not reached"
    assert _failed_at(result, "df0") == list(full_points), "a fault point was not reached"
    recoveries = [r.mode for name, r in result.records if name == "dt0" and r.kind == "refresh"]
    # after a failure at after_publish the refresh had committed: the next one has nothing to do
    assert recoveries == ["INCREMENTAL"] * (len(points) - 1) + ["NO_DATA"], recoveries
    assert {r.mode for name, r in result.records if name == "df0" and r.kind == "refresh"} == {
        "FULL"
    }


# -- a real process kill ----------------------------------------------------------------------------


def _crash(
    warehouse: Path, table: str, point: str, setup: Path | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "tests.differential.crash",
        "crash",
        "--warehouse",
        str(warehouse),
        "--table",
        table,
        "--point",
        point,
    ]
    if setup is not None:
        cmd += ["--setup", str(setup)]
    return subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow  # a second Spark starts in the subprocess: ~35 s on 2 idle cores
def test_killed_refresh_process_then_recovery(lh, harness: Harness) -> None:  # type: ignore[no-untyped-def]
    """A refresh process dies (os._exit) after staging its writes; this process takes
    over its stale lease and the next refresh is correct: nothing lost or doubled."""
    scenario = fault_scenario(FAULT_QUERY_INCREMENTAL, ["before_publish"])
    setup = Scenario("kill", [s for s in scenario.steps if s.op in ("sql", "create_dt")])
    result = harness.run(setup, cleanup=False)
    _assert_ok(result)
    info = result.dts["dt0"]
    table = load_table(lh.spark, lh.qualify(info.name))
    before = (table.current_snapshot_id(), table.properties().get("dyntables.refresh.id"))
    proc = _crash(lh.warehouse, info.name, "before_publish")
    try:
        assert proc.returncode == 17, (
            f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
        )
        table = load_table(lh.spark, lh.qualify(info.name))
        assert (
            table.current_snapshot_id(),
            table.properties().get("dyntables.refresh.id"),
        ) == before
        harness.check(info, "after the refresh process was killed")
        locks = lh.commands.registry.refresher.locks
        stale_after = locks.stale_after
        locks.stale_after = 6.0  # the dead process's lease: take it over after 6 s, not 30
        try:
            t0 = time.monotonic()
            out = lh.commands.registry.refresher.refresh(
                lh.commands.registry.get(lh.qualify(info.name)), "MANUAL"
            )
        finally:
            locks.stale_after = stale_after
        assert out.refresh_mode == "INCREMENTAL", out
        assert time.monotonic() - t0 < 120
        harness.check(info, "after recovering from the killed refresh")
    finally:
        harness._cleanup(result, setup)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_read_changes", "after_publish_state"])
def test_killed_refresh_process_fresh_warehouse(tmp_path: Path, point: str) -> None:
    """Both processes on a warehouse of their own: one sets up and dies mid-refresh, the
    next waits out the dead lease (30 s), refreshes and checks the oracle."""
    scenario = fault_scenario(FAULT_QUERY_INCREMENTAL, [point])
    setup = tmp_path / "setup.sql"
    statements = []
    for step in scenario.steps:
        if step.op == "sql":
            statements.append(step.args[0])
        elif step.op == "create_dt":
            statements.append(f"CREATE DYNAMIC TABLE {step.args[0]} AS {step.args[1]}")
    setup.write_text(";\n".join(statements))
    warehouse = tmp_path / "warehouse"
    proc = _crash(warehouse, "dt0", point, setup)
    assert proc.returncode == 17, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    recover = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.differential.crash",
            "recover",
            "--warehouse",
            str(warehouse),
            "--table",
            "dt0",
            "--query",
            FAULT_QUERY_INCREMENTAL,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert recover.returncode == 0, recover.stderr[-3000:]
    report = json.loads(recover.stdout.strip().splitlines()[-1])
    assert report["failure"] is None, report
    assert report["mode"] == "INCREMENTAL", report


# -- the regression corpus ------------------------------------------------------------------------


def _corpus(slow: bool = False) -> list[pytest.param]:  # type: ignore[valid-type]
    params = []
    for path in sorted(CORPUS.glob("*.scn")):
        scenario = parse_scenario(path.read_text(), path.stem)
        if bool(scenario.slow) != slow:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=scenario.bug)] if scenario.bug else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@pytest.mark.parametrize("path", _corpus())
def test_regression_scenario(quick_results: dict[str, Result], path: Path) -> None:
    _assert_ok(quick_results[f"corpus:{path.stem}"])


@pytest.mark.slow
@pytest.mark.parametrize("path", _corpus(slow=True))
def test_slow_regression_scenario(harness: Harness, path: Path) -> None:
    """The corpus files marked ``-- slow:``: the longest, whose features the quick
    profile, the plan tests and the rules oracle also cover. ``make test`` leaves them to
    CI, which runs them after it (``.ci/run``), and to ``make test-all``."""
    _assert_ok(harness.run(parse_scenario(path.read_text(), path.stem)))
