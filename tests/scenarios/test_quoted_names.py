"""Names Spark reads only back-quoted: a namespace `my-ns`, tables `or-ders`, `order`
(a keyword), `2024` (digits). Every statement a user writes them in must work, and
every refresh must be what it says (the oracle)."""

from __future__ import annotations

import pytest

from dyntables import Lakehouse
from tests.conftest import rows
from tests.oracle import assert_oracle


@pytest.fixture
def ns(lh: Lakehouse, unique) -> str:
    name = f"`my-ns {unique('q')}`"
    lh.sql(f"CREATE NAMESPACE {name}")
    return name


def _last(lh: Lakehouse, ns: str, table: str) -> tuple[str, str]:
    row = lh.sql(f"SHOW DYNAMIC TABLES IN {ns} LIKE '{table}'").collect()[0]
    return row.last_refresh_state, row.last_refresh_mode


def test_a_pipeline_in_a_namespace_and_tables_that_need_quoting(lh: Lakehouse, ns: str) -> None:
    orders, products = f"{ns}.`or-ders`", f"{ns}.`order`"
    gmv, board = f"{ns}.`gmv-by-cat`", f"{ns}.`2024`"
    lh.sql(
        f"""
        CREATE TABLE {orders} (id INT, pid INT, amount DECIMAL(10, 2), day DATE)
            PARTITIONED BY (day);
        CREATE TABLE {products} (pid INT, `cat-name` STRING);
        INSERT INTO {products} VALUES (1, 'books'), (2, 'toys'), (3, 'food');
        INSERT INTO {orders} VALUES (1, 1, 10.00, DATE'2024-01-01'), (2, 2, 5.50, DATE'2024-01-01'),
            (3, 3, 7.25, DATE'2024-01-02');
        CREATE DYNAMIC TABLE {gmv} AS
            SELECT p.`cat-name` AS cat, SUM(o.amount) AS gmv, COUNT(*) AS n
            FROM {orders} o JOIN {products} p ON o.pid = p.pid GROUP BY p.`cat-name`;
        CREATE DYNAMIC TABLE {board} AS
            SELECT cat, gmv, RANK() OVER (PARTITION BY n > 0 ORDER BY gmv DESC) AS r FROM {gmv}
        """
    )
    lh.sql(
        f"INSERT INTO {orders} VALUES (4, 1, 1.00, DATE'2024-01-03'), (5, 2, 20.00, DATE'2024-01-03')"
    )
    for table in (gmv, board):
        lh.sql(f"REFRESH DYNAMIC TABLE {table}")
        assert_oracle(lh, table)
    assert _last(lh, ns, "gmv-by-cat") == ("SUCCEED", "INCREMENTAL")
    assert _last(lh, ns, "2024") == ("SUCCEED", "INCREMENTAL")

    # updates and deletes: the captured change is a diff of files
    lh.sql(
        f"""
        UPDATE {orders} SET pid = 3 WHERE id = 1;
        DELETE FROM {orders} WHERE id = 2;
        UPDATE {products} SET `cat-name` = 'games' WHERE pid = 2
        """
    )
    for table in (gmv, board):
        lh.sql(f"REFRESH DYNAMIC TABLE {table}")
        assert_oracle(lh, table)
    assert _last(lh, ns, "gmv-by-cat") == ("SUCCEED", "INCREMENTAL")
    assert rows(lh.sql(f"SELECT cat, r FROM {board}")) == [("books", 3), ("food", 2), ("games", 1)]

    explained = dict(lh.sql(f"EXPLAIN DYNAMIC TABLE {gmv}").collect())
    assert explained["decision"] == "INCREMENTAL"
    lh.sql(f"REFRESH DYNAMIC TABLE {gmv} FULL")
    assert_oracle(lh, gmv)

    lh.sql(f"DROP DYNAMIC TABLE {board}")
    lh.sql(f"UNDROP TABLE {board}")
    lh.sql(f"INSERT INTO {orders} VALUES (6, 1, 100.00, DATE'2024-01-03')")
    lh.sql(f"REFRESH DYNAMIC TABLE {gmv}")
    lh.sql(f"REFRESH DYNAMIC TABLE {board}")
    assert_oracle(lh, board)
    assert _last(lh, ns, "2024") == ("SUCCEED", "INCREMENTAL")
    names = {r.name for r in lh.sql(f"SHOW DYNAMIC TABLES IN {ns}").collect()}
    assert names == {"gmv-by-cat", "2024"}
