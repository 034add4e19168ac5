"""A maintenance job that compacts and expires every table of the catalog meets the
aggregate state tables too (helper-20): the refresh must go on, never stay failed."""

from __future__ import annotations

import json

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
from tests.conftest import rows
from tests.oracle import assert_oracle


def _state_table(lh: Lakehouse, dt: str) -> str:
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    state = RefreshState.from_properties(table.properties())
    assert state is not None and state.state_tables
    name = str(next(iter(state.state_tables.values()))["table"])
    return name.split(".", 1)[1]  # namespace.table, as the procedures take it


def _last(lh: Lakehouse, dt: str) -> tuple[str, str | None]:
    row = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    return row.refresh_mode, json.loads(row.stats or "{}").get("full_reason")


def test_state_compacted_and_expired_is_rebuilt_not_failed(lh: Lakehouse, unique) -> None:
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k INT, v INT);
        INSERT INTO {src} VALUES (1, 10);
        INSERT INTO {src} VALUES (2, 20), (3, 30);
        CREATE DYNAMIC TABLE {dt} AS SELECT k % 2 AS g, SUM(v) AS s, MIN(v) AS m FROM {src} GROUP BY k % 2
        """
    )
    state = _state_table(lh, dt)
    compact = (
        f"CALL {lh.catalog}.system.rewrite_data_files(table => '{state}', "
        "options => map('rewrite-all', 'true'))"
    )
    # compaction alone: the same rows, kept (it was rolled back, silently)
    lh.sql(compact)
    lh.sql(f"INSERT INTO {src} VALUES (4, 40)")
    lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    assert _last(lh, dt) == ("INCREMENTAL", None)
    assert_oracle(lh, dt)
    # compaction, then expiry of the snapshot the last refresh recorded: every refresh
    # failed with "Cannot roll back to unknown snapshot id"
    lh.sql(compact)
    lh.sql(
        f"CALL {lh.catalog}.system.expire_snapshots(table => '{state}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    lh.sql(f"INSERT INTO {src} VALUES (5, 1)")
    lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    assert _last(lh, dt) == ("FULL", "STATE_MISSING")
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [(0, 60, 20), (1, 41, 1)]
    lh.sql(f"INSERT INTO {src} VALUES (7, 2)")
    lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    assert _last(lh, dt) == ("INCREMENTAL", None)
    assert_oracle(lh, dt)


def test_state_kept_for_another_plan_is_rebuilt(lh: Lakehouse, unique) -> None:
    """State whose columns are not the ones the plan reads (written by an older version
    that kept a running sum for an AVG it now recomputes) is rebuilt: FULL STATE_MISSING,
    then INCREMENTAL again."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k INT, a DECIMAL(38,10));
        INSERT INTO {src} VALUES (1, 1.0000000001), (1, 2.0000000002);
        CREATE DYNAMIC TABLE {dt} AS SELECT k, AVG(a) AS m FROM {src} GROUP BY k
        """
    )
    state = _state_table(lh, dt)
    lh.sql(f"ALTER TABLE lakehouse.{state} RENAME COLUMN a0_v TO a0_s")
    lh.sql(f"INSERT INTO {src} VALUES (1, 0.0000000007), (1, 3)")
    lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    assert _last(lh, dt) == ("FULL", "STATE_MISSING")
    assert rows(lh.sql(f"SELECT m FROM {dt}")) == [
        (rows(lh.sql(f"SELECT AVG(a) FROM {src}"))[0][0],)
    ]
    lh.sql(f"INSERT INTO {src} VALUES (2, 5)")
    lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    assert _last(lh, dt) == ("INCREMENTAL", None)
    assert_oracle(lh, dt)
