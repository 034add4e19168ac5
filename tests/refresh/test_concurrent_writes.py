"""Sources written while a refresh runs: the refresh reflects the snapshots it pinned,
says so in its recorded state, and the next refresh takes the concurrent writes.

The writes are committed from inside the refresh, at its named steps (``faults``), so
each case overlaps a refresh at a known point instead of by chance."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.errors import RefreshFailedError
from dyntables.refresh import faults
from tests.oracle import assert_oracle

QUERIES = {
    "join": "SELECT o.k, o.v, d.label FROM {src} o JOIN {dim} d ON o.k = d.k WHERE o.v > 0",
    "aggregate": "SELECT k, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS hi FROM {src} GROUP BY k",
    "dedup": "SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) "
    "AS rn FROM {src}) WHERE rn = 1",
}


def _recorded(lh: Lakehouse, dt: str) -> dict[str, int | None]:
    """The source snapshots ``dt``'s last refresh recorded, by source name."""
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    state = RefreshState.from_properties(table.properties())
    assert state is not None
    return {name.split(".")[-1]: version.snapshot for name, version in state.sources.items()}


def _current(lh: Lakehouse, name: str) -> int | None:
    table = load_table(lh.spark, lh.qualify(name))
    assert table is not None
    return table.current_snapshot_id()


def _write_once_at(point: str, write: Callable[[], object]) -> list[str]:
    """Install a hook that runs ``write`` the first time a refresh reaches ``point``; the
    list it returns records that it did."""
    fired: list[str] = []

    def hook(reached: str) -> None:
        if reached == point and not fired:
            fired.append(reached)
            write()

    faults.install(hook)
    return fired


def _sources(lh: Lakehouse, src: str, dim: str) -> None:
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        CREATE TABLE {dim} (k STRING, label STRING);
        INSERT INTO {src} VALUES ('a', 1), ('a', 2), ('b', 5), ('c', 3);
        INSERT INTO {dim} VALUES ('a', 'A'), ('b', 'B'), ('c', 'C')
        """
    )


def _refresh_while_writing(
    lh: Lakehouse, dt: str, source: str, point: str, write: Callable[[], object]
) -> None:
    """Refresh ``dt`` with ``write`` committed at ``point`` of the refresh: it reflects
    ``source`` as pinned, not as written; the next refresh takes the write."""
    pinned = _current(lh, source)
    fired = _write_once_at(point, write)
    try:
        outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    finally:
        faults.install(None)
    assert fired and outcome.refresh_mode == "INCREMENTAL"
    assert _recorded(lh, dt)[source] == pinned != _current(lh, source)
    assert_oracle(lh, dt)  # its query over the pinned snapshots, not the current ones

    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert _recorded(lh, dt)[source] == _current(lh, source)
    assert_oracle(lh, dt)


@pytest.mark.parametrize(
    ("shape", "point"),
    [
        ("join", "after_pin_sources"),
        ("aggregate", "after_compute"),
        ("dedup", "before_publish"),
    ],
)
def test_a_write_committed_during_a_refresh_waits_for_the_next_one(
    lh: Lakehouse, unique, shape: str, point: str
) -> None:  # type: ignore[no-untyped-def]
    src, dim, dt = unique("src"), unique("dim"), unique("dt")
    _sources(lh, src, dim)
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS {QUERIES[shape].format(src=src, dim=dim)}")
    lh.sql(f"INSERT INTO {src} VALUES ('a', 7), ('d', 4); DELETE FROM {src} WHERE v = 1")
    _refresh_while_writing(
        lh,
        dt,
        src,
        point,
        lambda: lh.sql(
            f"INSERT INTO {src} VALUES ('b', 9), ('e', 6); UPDATE {src} SET v = v + 10 WHERE k = 'a';"
            f"DELETE FROM {src} WHERE k = 'c'; INSERT INTO {dim} VALUES ('d', 'D'), ('e', 'E')"
        ),
    )


def test_an_upstream_dynamic_table_refreshed_during_a_downstream_refresh(
    lh: Lakehouse, unique
) -> None:  # type: ignore[no-untyped-def]
    src, dim, dwd, dws = unique("src"), unique("dim"), unique("dwd"), unique("dws")
    _sources(lh, src, dim)
    lh.sql(
        f"""
        CREATE DYNAMIC TABLE {dwd} AS {QUERIES["join"].format(src=src, dim=dim)};
        CREATE DYNAMIC TABLE {dws} AS
          SELECT label, COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo FROM {dwd} GROUP BY label
        """
    )
    lh.sql(f"INSERT INTO {src} VALUES ('a', 7); REFRESH DYNAMIC TABLE {dwd}")
    _refresh_while_writing(
        lh,
        dws,
        dwd,
        "after_read_changes",
        lambda: lh.sql(
            f"UPDATE {src} SET v = v * 3 WHERE k = 'a'; DELETE FROM {src} WHERE k = 'b';"
            f"REFRESH DYNAMIC TABLE {dwd}"
        ),
    )


@pytest.mark.parametrize(
    ("shape", "point"), [("aggregate", "after_pin_sources"), ("join", "after_compute")]
)
def test_a_write_into_the_dynamic_table_during_a_refresh_is_not_kept(
    lh: Lakehouse, unique, shape: str, point: str
) -> None:
    """A user's INSERT into the dynamic table (through Spark, past dyntables' guard)
    while an INCREMENTAL refresh ran: the refresh's write was based on it, published as
    the refresh's own, and the row stayed for good (helper-23). The refresh now fails
    as conflicting, and the next one recomputes, as after such a write between refreshes."""
    src, dim, dt = unique("src"), unique("dim"), unique("dt")
    _sources(lh, src, dim)
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS {QUERIES[shape].format(src=src, dim=dim)}")
    lh.sql(f"INSERT INTO {src} VALUES ('b', 7)")
    row = "('zz', 1, 1, 1)" if shape == "aggregate" else "('zz', 1, 'Z')"
    fired = _write_once_at(
        point, lambda: lh.spark.sql(f"INSERT INTO lakehouse.public.{dt} VALUES {row}")
    )
    try:
        with pytest.raises(RefreshFailedError, match=f"{dt} changed while it was being refreshed"):
            lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    finally:
        faults.install(None)
    assert fired
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert (outcome.refresh_mode, outcome.state) == ("FULL", "SUCCEED")
    assert lh.sql(f"SELECT count(*) FROM {dt} WHERE k = 'zz'").first()[0] == 0
    assert_oracle(lh, dt)


def test_a_source_column_dropped_and_added_during_a_refresh_is_not_read_as_null(
    lh: Lakehouse, unique
) -> None:
    """After the sources were pinned, a column the query reads was dropped and added
    again: the changes were read under the new schema, the old files' values as NULL,
    and the refresh published wrong sums as INCREMENTAL (helper-23). It now recomputes."""
    src, dim, dt = unique("src"), unique("dim"), unique("dt")
    _sources(lh, src, dim)
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS {QUERIES['aggregate'].format(src=src)}")
    lh.sql(f"UPDATE {src} SET v = v + 100 WHERE k = 'a'; INSERT INTO {src} VALUES ('b', 7)")

    def drop_and_add() -> None:
        lh.spark.sql(f"ALTER TABLE lakehouse.public.{src} DROP COLUMN v")
        lh.spark.sql(f"ALTER TABLE lakehouse.public.{src} ADD COLUMN v INT")

    fired = _write_once_at("after_pin_sources", drop_and_add)
    try:
        outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    finally:
        faults.install(None)
    assert fired and (outcome.refresh_mode, outcome.state) == ("FULL", "SUCCEED")
    history = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    assert json.loads(history.stats)["full_reason"] == "SOURCE_SCHEMA_CHANGED"
    assert_oracle(lh, dt)


def test_a_column_added_to_a_source_with_no_write_since(lh: Lakehouse, unique) -> None:
    """SELECT * over a source that gained a column after its last write: the plan was
    built over the current columns, one more than the table and the pinned rows have,
    and every refresh failed (zip() ... shorter) until the source's next write
    (helper-23). The plan is now built over the pinned snapshot's columns."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, k STRING, v INT);
        INSERT INTO {src} VALUES (1, 'a', 1), (2, 'b', 2);
        CREATE DYNAMIC TABLE {dt} AS SELECT * FROM {src};
        INSERT INTO {src} VALUES (3, 'c', 3);
        ALTER TABLE {src} ADD COLUMN extra INT
        """
    )
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert (outcome.refresh_mode, outcome.state) == ("INCREMENTAL", "SUCCEED")
    assert_oracle(lh, dt)
    assert sorted(r.id for r in lh.sql(f"SELECT id FROM {dt}").collect()) == [1, 2, 3]


def test_the_refresh_write_expired_before_its_publish(lh: Lakehouse, unique) -> None:
    """``expire_snapshots`` on the dynamic table after the refresh wrote and before it
    published: the write, not yet on the table's main branch, was expired with its files.
    The refresh failed with a raw Py4J message (helper-23); it now says what happened, and
    the next refresh takes the change."""
    src, dim, dt = unique("src"), unique("dim"), unique("dt")
    _sources(lh, src, dim)
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS {QUERIES['aggregate'].format(src=src)}")
    lh.sql(f"INSERT INTO {src} VALUES ('b', 7), ('d', 1)")
    fired = _write_once_at(
        "before_publish",
        lambda: lh.spark.sql(
            "CALL lakehouse.system.expire_snapshots(table => 'public."
            f"{dt}', older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1)"
        ).collect(),
    )
    try:
        with pytest.raises(RefreshFailedError) as failed:
            lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    finally:
        faults.install(None)
    assert fired
    message = str(failed.value)
    assert f"{dt}" in message and "expired before it was published" in message, message
    assert "Py4J" not in message and "Exception" not in message, message
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert outcome.state == "SUCCEED" and outcome.refresh_mode in ("INCREMENTAL", "FULL")
    assert_oracle(lh, dt)
    assert lh.sql(f"SELECT n FROM {dt} WHERE k = 'd'").first()[0] == 1
