"""Names Spark reads only back-quoted: a namespace `my-ns`, tables `or-ders`, `order`
(a keyword), `2024` (digits). Every statement a user writes them in must work, and
every refresh must be what it says (the oracle)."""

from __future__ import annotations

import pytest

from dyntables import Lakehouse
from dyntables.errors import InvalidOptionError, UnsupportedQueryError
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


def test_unqualified_names_after_use_of_such_a_namespace(lh: Lakehouse, ns: str) -> None:
    """Spark gives the current namespace back-quoted (```my-ns q_1```): unqualified names
    were looked up under the quoted text and not found (helper-19)."""
    home = lh.namespace
    lh.sql(f"USE {ns}")
    try:
        lh.sql(
            """
            CREATE TABLE src (k INT); INSERT INTO src VALUES (1);
            CREATE DYNAMIC TABLE d1 AS SELECT k FROM src;
            INSERT INTO src VALUES (2);
            REFRESH DYNAMIC TABLE d1
            """
        )
        assert rows(lh.sql("SELECT * FROM d1")) == [(1,), (2,)]
        assert [r.name for r in lh.sql("SHOW DYNAMIC TABLES").collect()] == ["d1"]
        assert dict(lh.sql("EXPLAIN DYNAMIC TABLE d1").collect())["decision"] == "INCREMENTAL"
    finally:
        lh.sql(f"USE {lh.catalog}.{home}")


def test_the_scheduler_finds_dynamic_tables_in_such_a_namespace(lh: Lakehouse, ns: str) -> None:
    """SHOW NAMESPACES back-quotes such a namespace, which was quoted again: the catalog
    walk (the scheduler's, snapshot expiry's) failed or skipped it (helper-19)."""
    from dyntables.scheduler.catalog import CatalogAccess

    lh.sql(f"CREATE TABLE {ns}.src (k INT); CREATE DYNAMIC TABLE {ns}.d1 AS SELECT k FROM {ns}.src")
    registry = lh.commands.registry
    assert ns.strip("`") in registry.namespaces()
    found = {str(dt.name) for dt in registry.all()}
    assert f"{lh.catalog}.{ns.strip('`')}.d1" in found
    snapshot = CatalogAccess(registry).read()
    assert f"{lh.catalog}.{ns.strip('`')}.d1" in snapshot.defs


def test_a_dot_inside_a_name_is_refused_at_create(lh: Lakehouse, ns: str) -> None:
    """Refresh state and history name tables catalog.namespace.table: a dot inside a
    part failed CREATE with a KeyError (helper-19)."""
    lh.sql(f"CREATE TABLE {ns}.`s.1` (k INT); CREATE TABLE {ns}.src (k INT)")
    with pytest.raises(InvalidOptionError, match=r"`s\.1` has a dot inside a name part"):
        lh.sql(f"CREATE DYNAMIC TABLE {ns}.d3 AS SELECT k FROM {ns}.`s.1`")
    with pytest.raises(InvalidOptionError, match=r"`d\.4` has a dot inside a name part"):
        lh.sql(f"CREATE DYNAMIC TABLE {ns}.`d.4` AS SELECT k FROM {ns}.src")
    assert not lh.spark.catalog.tableExists(f"{lh.catalog}.{ns}.`d.4`")
    lh.sql("CREATE OR REPLACE TEMPORARY VIEW `my-view` AS SELECT 1 AS k")
    with pytest.raises(UnsupportedQueryError, match="source my-view is a view"):
        lh.sql("CREATE DYNAMIC TABLE d5 AS SELECT k FROM `my-view`")
