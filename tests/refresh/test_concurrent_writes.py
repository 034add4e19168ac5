"""Sources written while a refresh runs: the refresh reflects the snapshots it pinned,
says so in its recorded state, and the next refresh takes the concurrent writes.

The writes are committed from inside the refresh, at its named steps (``faults``), so
each case overlaps a refresh at a known point instead of by chance."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
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
