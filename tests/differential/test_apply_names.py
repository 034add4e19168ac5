"""Applying a delta by MERGE (the path of tables above REWRITE_MAX_ROWS) to a table whose
columns are named like the MERGE's helper columns (found with the regression scenario
bug-column-named-like-internal-alias.scn, which only reaches the rewrite path)."""

from __future__ import annotations

from dyntables.refresh.apply import apply_delta
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
