"""A refresh killed at any step leaves the table before or after it, never between, and
the next refresh neither loses nor repeats a change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.refresh import faults
from dyntables.refresh.locks import RefreshLocks
from dyntables.refresh.runner import LOST_NOTE
from tests.conftest import rows
from tests.oracle import assert_oracle

QUERIES = {
    "aggregate": "SELECT k, COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo FROM {src} GROUP BY k",
    "projection": "SELECT k, v * 2 AS v2 FROM {src} WHERE v > 0",
}


@pytest.fixture
def fail_at():
    def install(point: str) -> None:
        def hook(reached: str) -> None:
            if reached == point:
                raise faults.InjectedFault(f"injected at {point}")

        faults.install(hook)

    yield install
    faults.install(None)


@pytest.mark.parametrize("shape", sorted(QUERIES))
@pytest.mark.parametrize("point", faults.POINTS)
def test_failure_at_every_step(lh: Lakehouse, unique, fail_at, shape: str, point: str) -> None:
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('a', 2), ('b', 5), ('c', 3);
        CREATE DYNAMIC TABLE {dt} AS {QUERIES[shape].format(src=src)}
        """
    )
    before = rows(lh.sql(f"SELECT * FROM {dt}"))
    lh.sql(
        f"INSERT INTO {src} VALUES ('a', 10), ('d', 4); DELETE FROM {src} WHERE v = 1; UPDATE {src} SET k = 'b' WHERE k = 'c'"
    )
    fail_at(point)
    with pytest.raises(faults.InjectedFault):
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    faults.install(None)
    after_crash = rows(lh.sql(f"SELECT * FROM {dt}"))
    if point == "after_publish":
        assert_oracle(lh, dt)  # the commit happened: the table is after the refresh
    else:
        assert after_crash == before  # nothing visible happened
    history = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    assert history.state == "FAILED" and "injected" in history.error_message
    # failed before it chose a mode: it ran neither mode, and its row says none
    chosen = None if point == "after_pin_sources" else "INCREMENTAL"
    assert history.refresh_mode == chosen
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert refreshed.refresh_mode == ("NO_DATA" if point == "after_publish" else "INCREMENTAL")
    assert_oracle(lh, dt)
    # one more change after recovery: still exact (no doubled or lost change)
    lh.sql(f"INSERT INTO {src} VALUES ('a', 100)")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert_oracle(lh, dt)


class _ProcessDied(BaseException):
    """Stands for a kill: no ``except Exception`` of the refresh sees it, so nothing
    after the point runs (the lease is left below, as a dead holder leaves it)."""


def test_a_refresh_that_died_before_its_history_row_is_recorded_by_the_next(
    lh: Lakehouse, unique
) -> None:
    """helper-24, bug 5: a process killed after its publish and before its history row
    left the table refreshed and no row saying so."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('b', 2);
        CREATE DYNAMIC TABLE {dt} AS {QUERIES["aggregate"].format(src=src)};
        INSERT INTO {src} VALUES ('a', 5), ('c', 7)
        """
    )

    def die(point: str) -> None:
        if point == "after_publish":
            raise _ProcessDied

    faults.install(die)
    try:
        with pytest.raises(_ProcessDied):
            lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    finally:
        faults.install(None)
    assert_oracle(lh, dt)  # committed
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    died = table.properties()["dyntables.refresh.id"]
    history = f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE job_id = '{died}'"
    assert lh.sql(history).count() == 0

    def dead_holders_lease() -> None:
        registry = lh.commands.registry
        locks = RefreshLocks(lh.spark, registry.system_root)
        path = f"{locks.root}/{registry.get(lh.qualify(dt)).dt_id}.lock"
        locks._write(path, "dead", overwrite=True)
        old = time.time() - 60
        os.utime(path, (old, old))

    dead_holders_lease()
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "NO_DATA"
    [row] = lh.sql(history).collect()
    assert (row.state, row.refresh_mode) == ("SUCCEED", "INCREMENTAL")
    stats = json.loads(row.stats)
    assert stats["note"] == LOST_NOTE and int(stats["rows_inserted"]) > 0
    dead_holders_lease()  # a takeover after a recorded refresh adds nothing
    lh.sql(f"INSERT INTO {src} VALUES ('d', 1)")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert lh.sql(history).count() == 1
    assert_oracle(lh, dt)


KILLER = textwrap.dedent(
    """
    import os, sys
    from dyntables import Lakehouse
    from dyntables.refresh import faults
    point = sys.argv[2]
    def hook(reached):
        if reached == point:
            os._exit(17)
    with Lakehouse(warehouse=sys.argv[1], conf={"spark.sql.shuffle.partitions": "2"}) as lh:
        faults.install(hook)
        lh.sql("REFRESH DYNAMIC TABLE dt")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_write", "after_publish_state"])
def test_process_killed_mid_refresh(tmp_path: Path, point: str) -> None:
    """A real kill (os._exit) in another process; this process then finishes the job."""
    warehouse = tmp_path / "wh"
    setup = textwrap.dedent(
        """
        import sys
        from dyntables import Lakehouse
        with Lakehouse(warehouse=sys.argv[1]) as lh:
            lh.sql("CREATE TABLE src (k STRING, v INT); INSERT INTO src VALUES ('a', 1), ('b', 2);"
                   "CREATE DYNAMIC TABLE dt AS SELECT k, SUM(v) AS total, COUNT(*) AS n FROM src GROUP BY k;"
                   "INSERT INTO src VALUES ('a', 5), ('c', 1); DELETE FROM src WHERE k = 'b'")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", setup, str(warehouse)], check=True, env=env, timeout=300)
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(warehouse), point], env=env, timeout=300
    )
    assert killed.returncode == 17
    check = textwrap.dedent(
        """
        import sys
        from dyntables import Lakehouse
        with Lakehouse(warehouse=sys.argv[1]) as lh:
            assert sorted(map(tuple, lh.sql("SELECT * FROM dt").collect())) == [("a", 1, 1), ("b", 2, 1)]
            mode = lh.sql("REFRESH DYNAMIC TABLE dt").first().refresh_mode
            assert mode == "INCREMENTAL", mode
            assert sorted(map(tuple, lh.sql("SELECT * FROM dt").collect())) == [("a", 6, 2), ("c", 1, 1)]
        """
    )
    subprocess.run([sys.executable, "-c", check, str(warehouse)], check=True, env=env, timeout=300)


def test_failure_after_the_state_of_an_empty_source_was_written(
    lh: Lakehouse, unique, fail_at
) -> None:
    """Aggregate state commits before the table does: the state a failed refresh wrote
    over a source that was empty at the last refresh is rolled back, not read."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        CREATE DYNAMIC TABLE {dt} AS {QUERIES["aggregate"].format(src=src)};
        INSERT INTO {src} VALUES ('a', 1), ('b', 2)
        """
    )
    fail_at("after_write")
    with pytest.raises(faults.InjectedFault):
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    faults.install(None)
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == []
    lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    assert_oracle(lh, dt)
    lh.sql(f"INSERT INTO {src} VALUES ('a', 5)")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert_oracle(lh, dt)


@pytest.mark.parametrize("point", ["after_write", "before_publish"])
def test_a_failed_full_refresh_leaves_no_state_tables_behind(
    lh: Lakehouse, unique, fail_at, point: str
) -> None:
    """A FULL refresh of an aggregate builds fresh state tables; when it fails before
    the table names them, no refresh will ever read them, so they are dropped (they
    were left behind, one set per failed refresh)."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('b', 5);
        CREATE DYNAMIC TABLE {dt} AS {QUERIES["aggregate"].format(src=src)};
        INSERT INTO {src} VALUES ('a', 10)
        """
    )

    def state_tables() -> set[str]:
        return {
            r.tableName
            for r in lh.sql("SHOW TABLES IN lakehouse.dyntables_sys").collect()
            if r.tableName.startswith("st_")
        }

    before = state_tables()
    fail_at(point)
    with pytest.raises(faults.InjectedFault):
        registry = lh.commands.registry
        registry.refresher.refresh(registry.get(lh.qualify(dt)), "MANUAL", force_full=True)
    faults.install(None)
    assert state_tables() == before
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert_oracle(lh, dt)
