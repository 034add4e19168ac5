"""What refreshes leave behind stays bounded: state tables keep the snapshot their table
recorded, a dynamic table keeps its retention period and whatever a downstream table
still reads, and Iceberg deletes old metadata files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.refresh import retention
from tests.oracle import assert_oracle


def _snapshots(lh: Lakehouse, table: str) -> int:
    name = table if "." in table else f"public.{table}"
    return int(lh.sql(f"SELECT count(*) FROM {name}.snapshots").first()[0])


def _state_table(lh: Lakehouse, dt: str) -> str:
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    state = RefreshState.from_properties(table.properties())
    assert state is not None
    [info] = state.state_tables.values()
    return str(info["table"])


def _metadata_version(lh: Lakehouse, table: str) -> int:
    """N of the table's current metadata file, one more per Iceberg commit: vN.metadata.json
    on a Hadoop catalog, N-<uuid>.metadata.json on the others (DYNTABLES_TEST_JDBC)."""
    path = lh.sql(
        f"SELECT file FROM public.{table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1"
    ).first()[0]
    match = re.search(r"/v?(\d+)(?:-[0-9a-f-]+)?\.metadata\.json$", path)
    assert match is not None, path
    return int(match.group(1))


def _latest(lh: Lakehouse, dt: str):  # type: ignore[no-untyped-def]
    return lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()


def test_a_state_table_keeps_only_the_snapshots_its_table_may_read(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "STATE_SNAPSHOTS_MAX", 2)
    src, dt = unique("src"), unique("agg")
    lh.sql(f"CREATE TABLE {src} (k STRING, v INT); INSERT INTO {src} VALUES ('a', 1)")
    lh.sql(
        f"CREATE DYNAMIC TABLE {dt} AS SELECT k, SUM(v) AS s, COUNT(*) AS n FROM {src} GROUP BY k"
    )
    state = _state_table(lh, dt)
    expired = 0
    for i in range(5):
        lh.sql(f"INSERT INTO {src} VALUES ('{'ab'[i % 2]}', {i})")
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert _snapshots(lh, state) <= 3
        stats = json.loads(_latest(lh, dt).stats)
        expired += int(stats.get(f"expired_snapshots.{state.rsplit('.', 1)[-1]}", 0))
        assert_oracle(lh, dt)
    assert expired >= 2
    assert _state_table(lh, dt) == state  # still incremental on the same state


def test_a_dynamic_table_keeps_its_retention_and_what_downstream_still_reads(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "EXPIRE_SLACK_MS", 0)
    src, up, down = unique("src"), unique("up"), unique("down")
    lh.sql(f"CREATE TABLE {src} (k INT, v INT); INSERT INTO {src} VALUES (1, 1)")
    lh.sql(f"CREATE DYNAMIC TABLE {up} AS SELECT k, v * 2 AS v2 FROM {src} WHERE v > 0")
    lh.sql(f"CREATE DYNAMIC TABLE {down} AS SELECT k, v2 FROM {up} WHERE v2 > 2")

    def change_and_refresh_up(i: int) -> None:
        lh.sql(f"INSERT INTO {src} VALUES ({i}, {i})")
        assert lh.sql(f"REFRESH DYNAMIC TABLE {up}").first().refresh_mode == "INCREMENTAL"

    # within the retention period (a day by default) every snapshot stays
    for i in range(2, 4):
        change_and_refresh_up(i)
    kept = _snapshots(lh, up)
    assert kept >= 3

    lh.sql(f"ALTER TABLE {up} SET PROPERTIES ('data_retention_days'='0')")
    for i in range(4, 7):
        change_and_refresh_up(i)
    # nothing before the snapshot `down` recorded at its creation may go: it reads
    # `up`'s changes from there
    assert _snapshots(lh, up) >= kept + 3
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {down}").first()
    assert refreshed.refresh_mode == "INCREMENTAL", refreshed
    assert_oracle(lh, down)

    # now that `down` has moved on, `up` keeps only from there
    change_and_refresh_up(7)
    assert _snapshots(lh, up) <= 2
    assert int(json.loads(_latest(lh, up).stats)[f"expired_snapshots.{up}"]) >= 3
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {down}").first()
    assert refreshed.refresh_mode == "INCREMENTAL", refreshed
    assert_oracle(lh, down)
    assert_oracle(lh, up)
    # the rows of the expired snapshots' files are gone from disk, the table's are not
    assert lh.sql(f"SELECT count(*) FROM {up}").first()[0] == 7


def test_old_metadata_files_are_deleted(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        retention,
        "METADATA_PROPERTIES",
        {**retention.METADATA_PROPERTIES, "write.metadata.previous-versions-max": "2"},
    )
    src, dt = unique("src"), unique("dt")
    lh.sql(f"CREATE TABLE {src} (k INT); INSERT INTO {src} VALUES (1)")
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS SELECT k FROM {src}")
    for i in range(4):
        lh.sql(f"INSERT INTO {src} VALUES ({i})")
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    metadata = Path(table.location.removeprefix("file:")) / "metadata"
    # each refresh commits twice (the staged write and its publish): 8 commits, 3 files
    assert len(list(metadata.glob("*.metadata.json"))) <= 3


def test_a_table_refreshed_often_keeps_at_most_snapshots_max(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the retention period, but past SNAPSHOTS_MAX, the oldest go, except what a
    downstream table still reads its changes from."""
    monkeypatch.setattr(retention, "SNAPSHOTS_MAX", 3)
    monkeypatch.setattr(retention, "SNAPSHOTS_SLACK", 1)
    src, up, down = unique("src"), unique("up"), unique("down")
    lh.sql(f"CREATE TABLE {src} (k INT, v INT); INSERT INTO {src} VALUES (1, 1)")
    lh.sql(f"CREATE DYNAMIC TABLE {up} AS SELECT k, v + 1 AS v1 FROM {src}")
    for i in range(2, 8):
        lh.sql(f"INSERT INTO {src} VALUES ({i}, {i})")
        assert lh.sql(f"REFRESH DYNAMIC TABLE {up}").first().refresh_mode == "INCREMENTAL"
        assert _snapshots(lh, up) <= 4  # SNAPSHOTS_MAX + SNAPSHOTS_SLACK
        assert_oracle(lh, up)
    assert _snapshots(lh, up) >= 3

    lh.sql(f"CREATE DYNAMIC TABLE {down} AS SELECT k, v1 FROM {up} WHERE v1 > 3")
    for i in range(8, 13):
        lh.sql(f"INSERT INTO {src} VALUES ({i}, {i})")
        before = _metadata_version(lh, up)
        lh.sql(f"REFRESH DYNAMIC TABLE {up}")
        if i > 8:  # the first one expired what is older than `down`'s snapshot
            # all that is due is read downstream: the staged write and its publish, and
            # no expiry commit (Iceberg commits nothing when nothing is expired)
            assert _metadata_version(lh, up) == before + 2
    # `down` recorded a snapshot of `up` five refreshes ago: none of those went
    assert _snapshots(lh, up) >= 6
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {down}").first()
    assert refreshed.refresh_mode == "INCREMENTAL", refreshed
    assert_oracle(lh, down)
    lh.sql(f"INSERT INTO {src} VALUES (13, 13)")
    lh.sql(f"REFRESH DYNAMIC TABLE {up}")
    assert _snapshots(lh, up) <= 4
    assert lh.sql(f"SELECT count(*) FROM {up}").first()[0] == 13


COMPLETED = "SELECT id, amount FROM {src} WHERE status = 'completed'"


def _statuses(lh: Lakehouse, src: str, create: str) -> None:
    """A source of one completed and one pending row, and ``create`` over it."""
    lh.sql(
        f"""
        CREATE TABLE {src} (id BIGINT, status STRING, amount INT);
        INSERT INTO {src} VALUES (1, 'completed', 10), (2, 'pending', 20);
        {create}
        """
    )


def test_a_replaced_querys_published_snapshots_stay_for_the_retention_period(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After CREATE OR REPLACE with a new query, the old query's refreshes are off the
    main lineage but were published (the snapshot log lists them): time travel to them
    keeps the retention period. They were expired with the unpublished writes (helper-33)."""
    monkeypatch.setattr(retention, "UNPUBLISHED_SLACK", 3)
    src, dt = unique("src"), unique("dt")
    _statuses(lh, src, f"CREATE DYNAMIC TABLE {dt} AS SELECT id, amount FROM {src}")
    for i in range(3):
        lh.sql(f"INSERT INTO {src} VALUES ({10 + i}, 'completed', {i})")
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    replaced = {s.snapshot_id: s.wap_id for s in table.snapshots()}
    assert sum(1 for wap_id in replaced.values() if wap_id) == 3
    lh.sql(f"CREATE OR REPLACE DYNAMIC TABLE {dt} AS {COMPLETED.format(src=src)}")
    for _ in range(7):  # staged, never published: expired once three more than the log
        lh.sql(f"UPDATE {src} SET amount = amount + 1 WHERE id = 2")
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    kept = {s.snapshot_id for s in table.snapshots()}
    assert set(replaced) <= kept
    unpublished = [s for s in table.snapshots() if s.wap_id and s.snapshot_id not in replaced]
    assert len(unpublished) < 3, unpublished
    first = next(iter(replaced))
    old_rows = lh.sql(f"SELECT count(*) FROM {dt} VERSION AS OF {first}").first()[0]
    assert old_rows > 0
    assert_oracle(lh, dt)


def test_writes_never_published_do_not_stay(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh whose rewrite changed nothing does not publish its staged write; nor
    does one that failed. Those snapshots and their files stayed until the retention
    period, uncounted by the snapshot cap, and without end on a table whose own history
    was one snapshot long (helper-24: 25 after 25 such refreshes)."""
    monkeypatch.setattr(retention, "UNPUBLISHED_SLACK", 3)
    src, dt = unique("src"), unique("dt")
    _statuses(lh, src, f"CREATE DYNAMIC TABLE {dt} AS {COMPLETED.format(src=src)}")
    unpublished = []
    for _ in range(7):
        lh.sql(f"UPDATE {src} SET amount = amount + 1 WHERE id = 2")  # a row the filter drops
        outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
        assert (outcome.rows_inserted, outcome.rows_deleted) == (0, 0)
        table = load_table(lh.spark, lh.qualify(dt))
        assert table is not None
        unpublished.append(len([s for s in table.snapshots() if s.wap_id]))
    assert max(unpublished) < 3 and unpublished[-1] < unpublished[1], unpublished
    assert _snapshots(lh, dt) == 1 + unpublished[-1]
    assert_oracle(lh, dt)
