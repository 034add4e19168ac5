"""NO_DATA costs no Spark job; every change-capture path gives exact changes."""

from __future__ import annotations

import json

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.engine.metrics import jobs_started
from tests.oracle import assert_oracle


def test_no_data_refresh_runs_no_spark_job_and_makes_no_commit(lh: Lakehouse, unique) -> None:
    src, dt = unique("src"), unique("dt")
    lh.sql(f"CREATE TABLE {src} (k STRING, v INT); INSERT INTO {src} VALUES ('a', 1)")
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS SELECT k, SUM(v) AS s FROM {src} GROUP BY k")
    snapshots = lh.sql(f"SELECT count(*) FROM public.{dt}.snapshots").first()[0]
    registry = lh.commands.registry
    registry.history.flush()  # the journal is moved into the history table every 100 rows
    jobs = jobs_started(lh.spark)
    outcome = registry.refresher.refresh(registry.get(lh.qualify(dt)))
    assert outcome.refresh_mode == "NO_DATA"
    assert jobs_started(lh.spark) == jobs  # not even for its history row
    assert lh.sql(f"SELECT count(*) FROM public.{dt}.snapshots").first()[0] == snapshots
    latest = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    assert (latest.refresh_mode, latest.job_id) == ("NO_DATA", outcome.job_id)
    # nor does the statement, its result read as a user reads it
    jobs = jobs_started(lh.spark)
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "NO_DATA"
    assert jobs_started(lh.spark) == jobs
    # while an incremental refresh does run jobs
    lh.sql(f"INSERT INTO {src} VALUES ('a', 2)")
    jobs = jobs_started(lh.spark)
    outcome = registry.refresher.refresh(registry.get(lh.qualify(dt)))
    assert outcome.refresh_mode == "INCREMENTAL"
    assert jobs_started(lh.spark) > jobs


def _stats(lh: Lakehouse, dt: str) -> dict[str, str]:
    latest = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    return dict(json.loads(latest.stats))


def _current_snapshot(lh: Lakehouse, table: str) -> int:
    return int(
        lh.sql(
            f"SELECT snapshot_id FROM public.{table}.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).first()[0]
    )


def _capture(lh: Lakehouse, dt: str) -> str:
    return next(v for k, v in _stats(lh, dt).items() if k.startswith("capture."))


def test_capture_paths_append_changelog_and_merge_on_read(lh: Lakehouse, unique) -> None:
    cow, mor, dt = unique("cow"), unique("mor"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {cow} (k INT, v STRING);
        CREATE TABLE {mor} (k INT, v STRING) TBLPROPERTIES ('write.delete.mode'='merge-on-read',
          'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read');
        INSERT INTO {cow} VALUES (1, 'a'), (2, 'b'), (2, 'b');
        INSERT INTO {mor} VALUES (1, 'x'), (2, 'y'), (3, 'z');
        CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS SELECT c.k, c.v, m.v AS mv FROM {cow} c JOIN {mor} m ON c.k = m.k
        """
    )
    lh.sql(f"INSERT INTO {cow} VALUES (3, 'c'); INSERT INTO {cow} VALUES (4, 'd'), (5, 'e')")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert _capture(lh, dt) == "append"
    # the refresh read the change (3 rows over two commits), not the table
    assert (_stats(lh, dt)[f"rows_read.{cow}"], _stats(lh, dt)[f"rows_read.{mor}"]) == ("3", "0")
    assert_oracle(lh, dt)
    before = _current_snapshot(lh, cow)
    lh.sql(f"DELETE FROM {cow} WHERE k = 1; UPDATE {cow} SET v = 'B' WHERE k = 2")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert _capture(lh, dt) == "changelog"
    # the rows of the files the two copy-on-write commits removed and added: what
    # Iceberg's changelog scan of the range reads (counted here by running it)
    changelog = len(
        lh.spark.read.format("iceberg")
        .option("start-snapshot-id", str(before))
        .option("end-snapshot-id", str(_current_snapshot(lh, cow)))
        .load(f"{lh.qualify(cow).sql()}.changes")
        .select("k", "v", "_change_type")
        .collect()  # a few rows; Spark's count() of a changelog scan fails (no columns)
    )
    assert changelog >= 3  # one row deleted, two rewritten
    assert _stats(lh, dt)[f"rows_read.{cow}"] == str(changelog)
    assert_oracle(lh, dt)
    # merge-on-read writes delete files, which changelog scans reject: snapshot diff
    lh.sql(f"DELETE FROM {mor} WHERE k = 3; UPDATE {mor} SET v = 'Y' WHERE k = 2")
    assert lh.sql(f"SELECT count(*) FROM public.{mor}.delete_files").first()[0] > 0
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert refreshed.refresh_mode == "INCREMENTAL"
    stats = json.loads(
        lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first().stats
    )
    assert stats[f"capture.{mor}"] == "snapshot_diff"
    assert_oracle(lh, dt)


def _current(lh: Lakehouse, table: str) -> int | None:
    return load_table(lh.spark, lh.qualify(table)).current_snapshot_id()


def test_inserts_through_a_join_are_appended_and_an_empty_append_is_not_published(
    lh: Lakehouse, unique
) -> None:
    o, p, dwd, dws = unique("o"), unique("p"), unique("dwd"), unique("dws")
    lh.sql(
        f"""
        CREATE TABLE {o} (id INT, pid INT, status STRING);
        CREATE TABLE {p} (pid INT, cat STRING);
        INSERT INTO {p} VALUES (1, 'A'), (2, 'B');
        INSERT INTO {o} VALUES (1, 1, 'done'), (2, 2, 'done');
        CREATE DYNAMIC TABLE {dwd} AS SELECT o.id, p.cat FROM {o} o JOIN {p} p ON o.pid = p.pid
          WHERE o.status = 'done';
        CREATE DYNAMIC TABLE {dws} AS SELECT cat, COUNT(*) AS n FROM {dwd} GROUP BY cat
        """
    )
    # new rows on both sides of the join, one of them twice: appended as they are
    lh.sql(
        f"INSERT INTO {p} VALUES (3, 'C'); INSERT INTO {o} VALUES (3, 3, 'done'), (3, 3, 'done'), (4, 1, 'done')"
    )
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {dwd}").first()
    assert (refreshed.refresh_mode, refreshed.rows_inserted, refreshed.rows_deleted) == (
        "INCREMENTAL",
        3,
        0,
    )
    assert_oracle(lh, dwd)
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dws}").first().refresh_mode == "INCREMENTAL"
    assert_oracle(lh, dws)
    # rows the filter drops: the refresh appends nothing, commits nothing visible, and
    # the layer below has nothing to do
    before = _current(lh, dwd)
    lh.sql(f"INSERT INTO {o} VALUES (5, 1, 'cancelled')")
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {dwd}").first()
    assert (refreshed.refresh_mode, refreshed.rows_inserted) == ("INCREMENTAL", 0)
    assert _current(lh, dwd) == before
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dws}").first().refresh_mode == "NO_DATA"
    # a delete is not an append: the consolidating path takes over, exactly
    lh.sql(f"DELETE FROM {o} WHERE id = 3")
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {dwd}").first()
    assert (refreshed.refresh_mode, refreshed.rows_deleted) == ("INCREMENTAL", 2)
    assert_oracle(lh, dwd)
