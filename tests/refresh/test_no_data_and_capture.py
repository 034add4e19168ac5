"""NO_DATA costs no Spark job; every change-capture path gives exact changes."""

from __future__ import annotations

import json

import pytest

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.engine.metrics import jobs_started
from tests.conftest import rows
from tests.iceberg_writes import equality_delete
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


def test_capture_paths_append_files_and_merge_on_read(lh: Lakehouse, unique) -> None:
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
    assert _capture(lh, dt) == "files"
    # the rows of the files the two copy-on-write commits removed and added, netted: the
    # file the DELETE wrote and the UPDATE rewrote again is read by neither side
    assert _stats(lh, dt)[f"rows_read.{cow}"] == str(_net_file_rows(lh, cow, before))
    assert_oracle(lh, dt)
    # merge-on-read writes delete files: the snapshots' scan tasks are compared
    lh.sql(f"DELETE FROM {mor} WHERE k = 3; UPDATE {mor} SET v = 'Y' WHERE k = 2")
    assert lh.sql(f"SELECT count(*) FROM public.{mor}.delete_files").first()[0] > 0
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert refreshed.refresh_mode == "INCREMENTAL"
    stats = json.loads(
        lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first().stats
    )
    assert stats[f"capture.{mor}"] == "snapshot_diff"
    assert_oracle(lh, dt)


def _net_file_rows(lh: Lakehouse, table: str, since: int) -> int:
    """Records of the data files in exactly one of the two snapshots (Iceberg's metadata
    tables, read separately)."""
    now = _current_snapshot(lh, table)
    name = lh.qualify(table).sql()
    files = [
        {
            r.file_path: r.record_count
            for r in lh.spark.read.format("iceberg")
            .option("snapshot-id", str(s))
            .load(f"{name}.files")
            .collect()
        }
        for s in (since, now)
    ]
    return sum(n for p, n in files[0].items() if p not in files[1]) + sum(
        n for p, n in files[1].items() if p not in files[0]
    )


MOR = (
    "TBLPROPERTIES ('format-version'='{v}', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
)


@pytest.mark.parametrize("version", [2, 3])
def test_a_merge_on_read_change_reads_only_the_files_it_touched(
    lh: Lakehouse, unique, version: int
) -> None:
    """Position deletes (v2) and deletion vectors (v3): the files a DELETE or UPDATE gave
    delete files are read as they were and as they are; the other partitions are not
    read at all, where comparing the two versions would read the table twice."""
    src, dt = unique("mor"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (p INT, k INT, v STRING, ts TIMESTAMP) PARTITIONED BY (p, days(ts))
          {MOR.format(v=version)};
        INSERT INTO {src} SELECT id % 4, id, CAST(id AS STRING), timestamp_seconds(86400 * (id % 2))
          FROM range(400);
        CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS
          SELECT p, k, upper(v) AS v FROM {src} WHERE k % 3 <> 0
        """
    )
    lh.sql(
        f"DELETE FROM {src} WHERE p = 1 AND k < 100; UPDATE {src} SET v = 'x' WHERE p = 1 AND k > 300"
    )
    assert lh.sql(f"SELECT count(*) FROM public.{src}.delete_files").first()[0] > 0
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    stats = _stats(lh, dt)
    assert stats[f"capture.{src}"] == "snapshot_diff"
    # partition 1's one file as it was and as it is, and the file of the UPDATE's new rows
    assert int(stats[f"rows_read.{src}"]) == 100 + 100 + 25
    assert_oracle(lh, dt)
    # only the partition the range changed is planned: its file and the UPDATE's new one
    table = load_table(lh.spark, lh.qualify(src))
    new = table.current_snapshot_id()
    chain = [s.snapshot_id for s in table.ancestors_between(new, table.snapshots()[0].snapshot_id)]
    touched = table.touched_partitions(chain)
    assert (len(table.scan_tasks(new, touched)), len(table.scan_tasks(new))) == (2, 5)
    # a staged scan is gone once the refresh ends
    jtable = table._t
    manager = lh.spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    assert manager.fetchSetIds(jtable).isEmpty()
    # deletes on deletes: a file whose deletes changed again, and rows re-inserted
    lh.sql(
        f"DELETE FROM {src} WHERE k IN (150, 301); INSERT INTO {src} VALUES (1, 1, '1', timestamp_seconds(86400)), (1, 1, '1', timestamp_seconds(86400))"
    )
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert_oracle(lh, dt)


def test_a_compaction_of_a_source_is_no_change(lh: Lakehouse, unique) -> None:
    """rewrite_data_files moves rows between files without changing them: a refresh after
    it alone is NO_DATA (even of a table that recomputes on every change), and one
    after it and real changes reads only those."""
    src, dt, full = unique("src"), unique("dt"), unique("full")
    lh.sql(
        f"""
        CREATE TABLE {src} (k INT, v INT);
        INSERT INTO {src} VALUES (1, 10), (2, 20);
        INSERT INTO {src} VALUES (3, 30);
        INSERT INTO {src} VALUES (3, 30);
        CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS SELECT k, SUM(v) AS s FROM {src} GROUP BY k;
        CREATE DYNAMIC TABLE {full} REFRESH_MODE = FULL AS SELECT k, v FROM {src}
        """
    )
    compact = f"CALL lakehouse.system.rewrite_data_files(table => 'public.{src}', options => map('min-input-files', '2'))"
    lh.sql(compact)
    assert lh.sql(f"SELECT count(*) FROM public.{src}.files").first()[0] == 1
    for name in (dt, full):
        before = _current(lh, name)
        refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {name}").first()
        assert (refreshed.refresh_mode, refreshed.rows_inserted, refreshed.rows_deleted) == (
            "NO_DATA",
            0,
            0,
        )
        assert _stats(lh, name)["compacted"] == str(lh.qualify(src))
        assert _current(lh, name) == before  # no commit of data
        assert_oracle(lh, name)
        # the compacted snapshot is recorded: the next refresh is NO_DATA from metadata
        assert "compacted" not in _refresh_stats(lh, name)
    # an insert, a compaction that swallows it, and an update of the compacted file:
    # the inserted file is read (+), the compacted file (which held it) as it left (-)
    lh.sql(f"INSERT INTO {src} VALUES (4, 40)")
    lh.sql(compact)
    lh.sql(f"UPDATE {src} SET v = v + 1 WHERE k = 1")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert _capture(lh, dt) == "files"
    assert _stats(lh, dt)[f"rows_read.{src}"] == str(1 + 5 + 5)
    assert_oracle(lh, dt)
    # a compaction and a change: the FULL-mode table recomputes
    assert lh.sql(f"REFRESH DYNAMIC TABLE {full}").first().refresh_mode == "FULL"
    assert_oracle(lh, full)


def test_a_query_reading_where_its_rows_are_stored_recomputes_after_a_compaction(
    lh: Lakehouse, unique
) -> None:
    """A compaction changes no row but every row's ``_file``: a query reading it is not
    NO_DATA after one (helper-22)."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, v INT);
        INSERT INTO {src} VALUES (1, 10);
        INSERT INTO {src} VALUES (2, 20);
        CREATE DYNAMIC TABLE {dt} AS SELECT id, v, _file AS f FROM {src}
        """
    )
    lh.sql(
        f"CALL lakehouse.system.rewrite_data_files(table => 'public.{src}', "
        "options => map('rewrite-all', 'true'))"
    )
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "FULL"
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == rows(lh.sql(f"SELECT id, v, _file FROM {src}"))


def test_a_compaction_between_merge_on_read_changes_is_read_around(lh: Lakehouse, unique) -> None:
    """A compaction of a source with delete files rewrites its files without changing a
    row: the refresh reads the changes before and after it, never the files it rewrote
    (a nightly compaction used to make the next one-row INSERT read them all twice)."""
    src, dt = unique("mor"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k INT, v INT) {MOR.format(v=2)};
        INSERT INTO {src} SELECT id, id % 7 FROM range(300);
        INSERT INTO {src} SELECT id, id % 5 FROM range(300, 600);
        DELETE FROM {src} WHERE k < 10;
        CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS
          SELECT v, COUNT(*) AS n, SUM(k) AS s FROM {src} GROUP BY v
        """
    )
    compact = (
        f"CALL lakehouse.system.rewrite_data_files(table => 'public.{src}', "
        "options => map('rewrite-all', 'true'))"
    )
    lh.sql(compact)
    lh.sql(f"INSERT INTO {src} VALUES (1000, 3)")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert int(_stats(lh, dt)[f"rows_read.{src}"]) == 1
    assert_oracle(lh, dt)
    # a delete on the compacted file (read as it was and as it is), a compaction, and an
    # insert: the compaction's files are not read
    lh.sql(f"DELETE FROM {src} WHERE k BETWEEN 20 AND 29")
    compacted = lh.sql(f"SELECT sum(record_count) FROM public.{src}.data_files").first()[0]
    lh.sql(compact)
    lh.sql(f"INSERT INTO {src} VALUES (1001, 4), (1002, 4)")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert _capture(lh, dt) == "snapshot_diff"
    assert int(_stats(lh, dt)[f"rows_read.{src}"]) == 2 * (compacted - 1) + 2
    assert_oracle(lh, dt)


def _refresh_stats(lh: Lakehouse, dt: str) -> dict[str, str]:
    """The stats of a refresh run now (a NO_DATA from metadata records plain stats)."""
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "NO_DATA"
    return _stats(lh, dt)


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


@pytest.mark.parametrize("partitioned", [False, True])
def test_equality_deletes_as_a_flink_upsert_writes_them(
    lh: Lakehouse, unique, partitioned: bool
) -> None:
    """Equality deletes (the seeds' Flink article: an upsert sink deletes by key) apply
    to every older data file of their partition, or of the whole table when it is
    unpartitioned: those files are read as they were and as they are, and a row inserted
    after the delete, with the same key, stays."""
    src, agg, top = unique("eq"), unique("dt"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k INT, p INT, v INT) {"PARTITIONED BY (p)" if partitioned else ""}
          {MOR.format(v=2)};
        INSERT INTO {src} SELECT id, id % 4, id FROM range(100);
        INSERT INTO {src} VALUES (200, 2, 5);
        INSERT INTO {src} VALUES (201, 3, 6);
        CREATE DYNAMIC TABLE {agg} REFRESH_MODE = INCREMENTAL AS
          SELECT p, SUM(v) AS s, COUNT(*) AS n, MAX(v) AS m FROM {src} GROUP BY p;
        CREATE DYNAMIC TABLE {top} REFRESH_MODE = INCREMENTAL AS
          SELECT p, k, v FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY p ORDER BY v DESC, k) AS rn FROM {src}
          ) WHERE rn = 1
        """
    )
    # upserts in partition 2: keys 2, 6 and 98 (its MAX) replaced, 200 deleted
    equality_delete(lh, src, "k", [2, 6, 98, 200], {"p": 2})
    lh.sql(f"INSERT INTO {src} VALUES (6, 2, 600), (98, 2, 1)")
    assert lh.sql(f"SELECT count(*) FROM public.{src}.delete_files").first()[0] == 1
    for dt in (agg, top):
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert_oracle(lh, dt)
    stats = _stats(lh, agg)
    assert stats[f"capture.{src}"] == "snapshot_diff"
    # the files the delete applies to, as they were and as they are, and the new rows:
    # partition 2's 25 + 1 rows, or 100 + 1 (Iceberg leaves out the file of k = 201, which
    # its bounds keep clear of the deleted keys)
    assert int(stats[f"rows_read.{src}"]) == 2 * (26 if partitioned else 101) + 2
    assert rows(lh.sql(f"SELECT * FROM {agg} WHERE p = 2")) == [(2, 1250 + 5 - 111 + 601, 24, 600)]
    # the key re-inserted is deleted again, and inserted once more after that
    equality_delete(lh, src, "k", [6, 7], {"p": 2})
    lh.sql(f"INSERT INTO {src} VALUES (6, 2, 60)")
    for dt in (agg, top):
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert_oracle(lh, dt)
    assert rows(lh.sql(f"SELECT * FROM {top} WHERE p = 2")) == [(2, 94, 94)]
