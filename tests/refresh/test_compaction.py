"""A dynamic table's small files are compacted after its refreshes, under its lease: no
row changes, its next refresh stays INCREMENTAL and a downstream table reads nothing."""

from __future__ import annotations

import json
import threading

import pytest

from dyntables import Lakehouse
from dyntables.refresh import compaction
from dyntables.refresh.runner import RefreshOutcome
from tests.oracle import assert_oracle
from tests.refresh.test_retention import _latest


def _data_files(lh: Lakehouse, table: str) -> int:
    return int(lh.sql(f"SELECT count(*) FROM public.{table}.files").first()[0])


def test_small_files_are_compacted_after_a_refresh(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compaction, "COMPACT_MIN_FILES", 6)
    src, dt, down = unique("src"), unique("dt"), unique("down")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, k STRING, v INT);
        INSERT INTO {src} VALUES (1, 'a', 1), (2, 'b', 2);
        CREATE DYNAMIC TABLE {dt} AS SELECT id, k, v * 10 AS v10 FROM {src} WHERE v > 0;
        CREATE DYNAMIC TABLE {down} AS SELECT k, SUM(v10) AS s, COUNT(*) AS n FROM {dt} GROUP BY k
        """
    )
    compacted_at = None
    for i in range(3, 12):
        lh.sql(f"INSERT INTO {src} VALUES ({i}, '{'abc'[i % 3]}', {i})")
        outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
        assert (outcome.state, outcome.refresh_mode) == ("SUCCEED", "INCREMENTAL")
        stats = json.loads(_latest(lh, dt).stats)
        if f"compacted_files.{dt}" in stats:
            compacted_at = i
            break
        assert _data_files(lh, dt) == i - 1  # one appended file per refresh
    assert compacted_at is not None, "never compacted"
    rewritten, added = map(int, stats[f"compacted_files.{dt}"].split(" -> "))
    assert rewritten >= 6 and added < rewritten and _data_files(lh, dt) == added
    operation = lh.sql(
        f"SELECT operation FROM public.{dt}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    assert operation == "replace"
    assert_oracle(lh, dt)

    # the downstream table's first refresh since reads the rows appended before the
    # compaction, not the files it rewrote
    assert lh.sql(f"REFRESH DYNAMIC TABLE {down}").first().refresh_mode == "INCREMENTAL"
    read = int(json.loads(_latest(lh, down).stats)[f"rows_read.{dt}"])
    assert read == compacted_at - 2
    assert_oracle(lh, down)

    # the table's next refresh is INCREMENTAL: a compaction is no change made outside
    lh.sql(f"UPDATE {src} SET v = -1 WHERE id = 1; INSERT INTO {src} VALUES (100, 'z', 5)")
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert (outcome.refresh_mode, outcome.rows_inserted, outcome.rows_deleted) == (
        "INCREMENTAL",
        1,
        1,
    )
    assert f"compacted_files.{dt}" not in json.loads(_latest(lh, dt).stats)  # not yet due
    assert_oracle(lh, dt)
    assert lh.sql(f"REFRESH DYNAMIC TABLE {down}").first().refresh_mode == "INCREMENTAL"
    assert_oracle(lh, down)


def test_a_table_whose_files_cannot_be_fewer_is_asked_once_per_doubling(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitioned so that each refresh writes into a new partition: nothing to compact,
    and Iceberg's planner, which reads every manifest, is not asked at each refresh."""
    monkeypatch.setattr(compaction, "COMPACT_MIN_FILES", 3)
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, v INT);
        INSERT INTO {src} VALUES (1, 1);
        CREATE DYNAMIC TABLE {dt} PARTITIONED BY (id) AS SELECT id, v FROM {src}
        """
    )
    asked = []
    for i in range(2, 8):
        lh.sql(f"INSERT INTO {src} VALUES ({i}, {i})")
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
        if f"compacted_files.{dt}" in json.loads(_latest(lh, dt).stats):
            asked.append(i)
    assert asked == [3, 6]  # at 3 files, then at 6
    assert json.loads(_latest(lh, dt).stats).get(f"compacted_files.{dt}") is None
    assert _data_files(lh, dt) == 7
    assert_oracle(lh, dt)


def test_a_compacted_source_is_no_lag_and_no_work(lh: Lakehouse, unique) -> None:
    """SHOW's data_lag_seconds counted a source's compaction as a commit the table did
    not reflect, until the next refresh, which had nothing to do."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1);
        INSERT INTO {src} VALUES ('b', 2);
        CREATE DYNAMIC TABLE {dt} AS SELECT k, SUM(v) AS s FROM {src} GROUP BY k
        """
    )
    lh.spark.sql(
        f"CALL lakehouse.system.rewrite_data_files(table => 'public.{src}', "
        "options => map('min-input-files', '2'))"
    ).collect()
    assert (
        lh.sql(f"SELECT operation FROM public.{src}.snapshots ORDER BY committed_at DESC").first()[
            0
        ]
        == "replace"
    )
    assert lh.sql(f"SHOW DYNAMIC TABLES LIKE '{dt}'").first().data_lag_seconds == 0.0
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "NO_DATA"
    lh.sql(f"INSERT INTO {src} VALUES ('a', 5)")
    assert lh.sql(f"SHOW DYNAMIC TABLES LIKE '{dt}'").first().data_lag_seconds > 0.0


def test_a_refresh_in_another_thread_compacts(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the scheduler refreshes: from a thread of its own. There Iceberg's rewrite
    resolved its file groups in another session than the refresh's, and every
    compaction failed (the demo logged the error each few seconds; the files grew)."""
    monkeypatch.setattr(compaction, "COMPACT_MIN_FILES", 4)
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, k STRING);
        INSERT INTO {src} VALUES (1, 'a');
        CREATE DYNAMIC TABLE {dt} AS SELECT id, k FROM {src}
        """
    )
    registry = lh.commands.registry
    outcomes: list[RefreshOutcome] = []
    errors: list[Exception] = []

    def refresh_each_insert() -> None:
        try:
            for i in range(2, 9):
                lh.sql(f"INSERT INTO {src} VALUES ({i}, 'b')")
                outcomes.append(registry.refresher.refresh(registry.get(lh.qualify(dt))))
        except Exception as exc:  # surfaced in the test's thread
            errors.append(exc)

    worker = threading.Thread(target=refresh_each_insert)
    worker.start()
    worker.join()
    assert not errors, errors
    assert [o.maintenance_error for o in outcomes] == [None] * 7
    # at 4 files Iceberg's planner found no group worth rewriting ("0 -> 0")
    assert outcomes[-1].compacted == "8 -> 1", [o.compacted for o in outcomes]
    # the history says the same (the outcome is what the scheduler sees)
    assert json.loads(_latest(lh, dt).stats)[f"compacted_files.{dt}"] == "8 -> 1"
    assert _data_files(lh, dt) == 1
    assert_oracle(lh, dt)
