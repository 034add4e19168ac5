"""Applying a delta that carries a MAP column as its entries (Plan.entries): Spark can
group and compare the entries where it cannot a MAP, so every way of applying a delta
reads the table's MAP as ``map_entries`` and writes ``map_from_entries``. Each way is
taken here on purpose; scenarios reach them only as their table sizes fall."""

from __future__ import annotations

import pytest

from dyntables.catalog.iceberg import load_table
from dyntables.refresh import apply
from dyntables.refresh.apply import Partitioning, append_delta, apply_delta

ROWS = [
    "(1, map('a', 1, 'b', 2), DATE '2024-01-01')",
    "(1, map('a', 1, 'b', 2), DATE '2024-01-01')",  # a duplicate
    "(2, map('b', 2, 'a', 1), DATE '2024-01-02')",  # the same entries in another order
    "(3, NULL, DATE '2024-01-02')",
    "(4, map(), DATE '2024-01-03')",
]
# one copy of k=1 and the k=2 row (told from k=1's MAP by its order) go, NULL and the
# empty MAP go, two copies of a new MAP come
DELTA = (
    "SELECT k, map_entries(m) AS m, d, w AS __w FROM VALUES "
    "(1, map('a', 1, 'b', 2), DATE '2024-01-01', -1L), "
    "(2, map('b', 2, 'a', 1), DATE '2024-01-02', -1L), "
    "(3, CAST(NULL AS MAP<STRING, INT>), DATE '2024-01-02', -1L), "
    "(4, map(), DATE '2024-01-03', -1L), "
    "(5, map('c', 3), DATE '2024-01-03', 2L) AS v(k, m, d, w)"
)
AFTER = [
    (1, [("a", 1), ("b", 2)], "2024-01-01"),
    (5, [("c", 3)], "2024-01-03"),
    (5, [("c", 3)], "2024-01-03"),
]


def _table(lh, unique, partitioned: bool = False) -> str:  # type: ignore[no-untyped-def]
    name = unique("apply_maps")
    spec = " PARTITIONED BY (days(d))" if partitioned else ""
    lh.sql(f"CREATE TABLE {name} (k INT, m MAP<STRING, INT>, d DATE){spec}")
    lh.sql(f"INSERT INTO {name} VALUES {', '.join(ROWS)}")
    return name


def _apply(lh, name: str, delta: str, table_rows, partitioning=None):  # type: ignore[no-untyped-def]
    """The delta applied to table ``name``, its column ``m`` carried as entries."""
    columns, table = ["k", "m", "d"], lh.qualify(name).sql()
    return apply_delta(
        lh.spark, table, columns, delta, "_apply_maps", table_rows, partitioning, frozenset({"m"})
    )


def _contents(lh, name: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    """The rows, each MAP as its entries in its own order (which a write must keep)."""
    got = lh.sql(f"SELECT k, map_entries(m) AS m, CAST(d AS STRING) AS d FROM {name}").collect()
    return sorted(
        ((r.k, None if r.m is None else [tuple(e) for e in r.m], r.d) for r in got), key=repr
    )


@pytest.mark.parametrize(
    "table_rows", [5, 100_000, None], ids=["rewrite", "rewrite-counted", "merge"]
)
def test_a_delta_of_entries_applied_to_a_map_column(lh, unique, table_rows) -> None:  # type: ignore[no-untyped-def]
    name = _table(lh, unique)
    try:
        applied = _apply(lh, name, DELTA, table_rows)
        assert (applied.rows_inserted, applied.rows_deleted) == (2, 4)
        assert _contents(lh, name) == AFTER
    finally:
        lh.sql(f"DROP TABLE IF EXISTS {name}")


def test_a_delta_of_entries_overwrites_the_partitions_it_removes_rows_from(  # type: ignore[no-untyped-def]
    lh, unique, monkeypatch
) -> None:
    overwrites: list[str] = []
    overwrite = apply._overwrite
    monkeypatch.setattr(
        apply, "_overwrite", lambda *a: (overwrites.append(a[4]), overwrite(*a))[-1]
    )
    monkeypatch.setattr(apply, "OVERWRITE_FILES_PER_VALUE", 1_000_000)
    name = _table(lh, unique, partitioned=True)
    iceberg = load_table(lh.spark, lh.qualify(name))
    assert iceberg is not None
    partitioning = Partitioning(tuple(iceberg.partition_fields()), iceberg.count_files)
    try:
        applied = _apply(lh, name, DELTA, None, partitioning)
        assert (applied.rows_inserted, applied.rows_deleted) == (2, 4)
        assert len(overwrites) == 1
        assert _contents(lh, name) == AFTER
    finally:
        lh.sql(f"DROP TABLE IF EXISTS {name}")


def test_a_delta_removing_a_map_the_table_lacks_is_inconsistent(lh, unique) -> None:  # type: ignore[no-untyped-def]
    """k=2's MAP in k=1's order matches no row: the table and the delta disagree, and
    the refresh falls back to FULL rather than deleting the row that looks the same."""
    name = _table(lh, unique)
    delta = (
        "SELECT 2 AS k, map_entries(map('a', 1, 'b', 2)) AS m, DATE '2024-01-02' AS d, -1L AS __w"
    )
    try:
        for table_rows in (5, None):
            with pytest.raises(Exception, match="disagree"):
                _apply(lh, name, delta, table_rows)
        assert len(_contents(lh, name)) == len(ROWS)
    finally:
        lh.sql(f"DROP TABLE IF EXISTS {name}")


def test_an_appended_delta_of_entries_is_written_as_maps(lh, unique) -> None:  # type: ignore[no-untyped-def]
    name = _table(lh, unique)
    delta = "SELECT k, map_entries(m) AS m, d, 2L AS __w FROM VALUES (6, map('z', 0, 'y', 1), DATE '2024-01-04') AS v(k, m, d)"
    try:
        append_delta(lh.spark, lh.qualify(name).sql(), ["k", "m", "d"], delta, frozenset({"m"}))
        assert [r for r in _contents(lh, name) if r[0] == 6] == [
            (6, [("z", 0), ("y", 1)], "2024-01-04")
        ] * 2
    finally:
        lh.sql(f"DROP TABLE IF EXISTS {name}")
