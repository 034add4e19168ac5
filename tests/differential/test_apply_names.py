"""Applying a delta by MERGE (the path of tables above REWRITE_MAX_ROWS) to a table whose
columns are named like the MERGE's helper columns (found with the regression scenario
bug-column-named-like-internal-alias.scn, which only reaches the rewrite path)."""

from __future__ import annotations

from dyntables.catalog.iceberg import load_table
from dyntables.refresh import apply
from dyntables.refresh.apply import Partitioning, apply_delta
from tests.conftest import rows


def test_merge_with_columns_named_like_its_helpers(lh, unique) -> None:  # type: ignore[no-untyped-def]
    name = unique("apply_names")
    lh.sql(f"CREATE TABLE {name} (k INT, _n INT, _op STRING, _cur INT, _one INT, __i INT, _n_ INT)")
    lh.sql(
        f"INSERT INTO {name} VALUES (1, 1, 'a', 1, 1, 1, 1), (1, 1, 'a', 1, 1, 1, 1), (2, 2, 'b', 2, 2, 2, 2)"
    )
    table = lh.qualify(name).sql()
    columns = ["k", "_n", "_op", "_cur", "_one", "__i", "_n_"]
    delta = (
        "SELECT * FROM VALUES (1, 1, 'a', 1, 1, 1, 1, -1L), (3, 3, 'c', 3, 3, 3, 3, 2L) "
        "AS d(k, _n, _op, _cur, _one, __i, _n_, __w)"
    )
    try:
        applied = apply_delta(lh.spark, table, columns, delta, "_apply_names", table_rows=None)
        assert (applied.rows_inserted, applied.rows_deleted) == (2, 1)
        assert rows(lh.sql(f"SELECT * FROM {name}")) == sorted(
            [
                (1, 1, "a", 1, 1, 1, 1),
                (2, 2, "b", 2, 2, 2, 2),
                (3, 3, "c", 3, 3, 3, 3),
                (3, 3, "c", 3, 3, 3, 3),
            ],
            key=repr,
        )
    finally:
        lh.sql(f"DROP TABLE IF EXISTS {name}")


def test_partition_overwrite_with_columns_named_like_its_helpers(lh, unique, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same through the overwrite of the partitions losing rows (the table is
    partitioned by ``_n``, a column named like the overwrite's count)."""
    overwrites: list[str] = []
    overwrite = apply._overwrite
    monkeypatch.setattr(
        apply, "_overwrite", lambda *a: (overwrites.append(a[4]), overwrite(*a))[-1]
    )
    name = unique("apply_names")
    lh.sql(f"CREATE TABLE {name} (k INT, _n INT, _m STRING, __i INT, _n_ INT) PARTITIONED BY (_n)")
    lh.sql(f"INSERT INTO {name} VALUES (1, 1, 'a', 1, 1), (1, 1, 'a', 1, 1), (2, 2, 'b', 2, 2)")
    table = lh.qualify(name).sql()
    iceberg = load_table(lh.spark, lh.qualify(name))
    assert iceberg is not None and iceberg.partition_fields() == [("_n", "identity")]
    partitioning = Partitioning(tuple(iceberg.partition_fields() or ()), iceberg.count_files)
    delta = (
        "SELECT * FROM VALUES (1, 1, 'a', 1, 1, -1L), (3, 3, 'c', 3, 3, 2L), (2, 2, 'b', 2, 2, -1L) "
        "AS d(k, _n, _m, __i, _n_, __w)"
    )
    try:
        applied = apply_delta(
            lh.spark,
            table,
            ["k", "_n", "_m", "__i", "_n_"],
            delta,
            "_apply_names",
            None,
            partitioning,
        )
        assert (applied.rows_inserted, applied.rows_deleted) == (2, 2)
        assert overwrites == ["`_n` IN (1, 2)"]
        assert rows(lh.sql(f"SELECT * FROM {name}")) == sorted(
            [(1, 1, "a", 1, 1), (3, 3, "c", 3, 3), (3, 3, "c", 3, 3)], key=repr
        )
    finally:
        lh.sql(f"DROP TABLE IF EXISTS {name}")
