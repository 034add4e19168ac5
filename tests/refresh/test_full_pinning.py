"""A source pinned before its first commit reads as empty even when rows have landed
since (a commit racing with the refresh), by a filter Spark neither folds nor calls
non-deterministic (query.never_true)."""

from __future__ import annotations

from collections.abc import Callable

from dyntables import Lakehouse
from dyntables.catalog.definition import SourceVersion
from dyntables.catalog.iceberg import load_table
from dyntables.plan.query import parse_query
from dyntables.refresh.full import pinned_sql


def _pinned_unwritten(lh: Lakehouse, query: str, *names: str, written: str = "") -> str:
    """``query`` with ``names`` pinned as never written, though they hold rows now, and
    ``written`` at its current snapshot."""
    pinned = {}
    for name in [*names, *filter(None, [written])]:
        table = load_table(lh.spark, lh.qualify(name))
        assert table is not None and table.current_snapshot_id() is not None
        snapshot = table.current_snapshot_id() if name == written else None
        pinned[str(lh.qualify(name))] = SourceVersion(snapshot, table.uuid)
    return pinned_sql(lh.spark, parse_query(query), lh.qualify, pinned)


def test_rows_committed_after_the_pin_are_not_read(
    lh: Lakehouse, unique: Callable[[str], str]
) -> None:
    """Also where the table's own columns hide Iceberg's metadata columns."""
    t, own, every = unique("racing"), unique("own_pos"), unique("own_all")
    lh.sql(f"CREATE TABLE {t} (k INT NOT NULL)")
    lh.sql(f"CREATE TABLE {own} (_pos BIGINT, k INT)")
    lh.sql(f"CREATE TABLE {every} (_pos BIGINT, _spec_id INT, _file STRING, k INT)")
    lh.sql(f"INSERT INTO {t} VALUES (1), (2)")
    lh.sql(f"INSERT INTO {own} VALUES (-5, 1), (NULL, 2)")
    lh.sql(f"INSERT INTO {every} VALUES (-5, -1, '', 1)")
    sql = _pinned_unwritten(
        lh,
        f"SELECT * FROM {t} UNION ALL SELECT k FROM {own} UNION ALL SELECT k FROM {every}",
        t,
        own,
        every,
    )
    assert "_pos < 0" in sql and "_spec_id < 0" in sql and "SPARK_PARTITION_ID() < 0" in sql
    assert lh.spark.sql(sql).count() == 0


def test_a_correlated_count_over_it_is_zero_and_may_sit_in_an_aggregate(
    lh: Lakehouse, unique: Callable[[str], str]
) -> None:
    """Over ``WHERE false`` Spark answers NULL for the count; and the partition id, which
    Spark calls non-deterministic, failed the query under an aggregate's argument."""
    orders, returns = unique("orders"), unique("returns")
    lh.sql(f"CREATE TABLE {orders} (id INT, g INT, amt INT)")
    lh.sql(f"CREATE TABLE {returns} (oid INT NOT NULL)")
    lh.sql(f"INSERT INTO {orders} VALUES (1, 1, 10), (2, 1, 3)")
    lh.sql(f"INSERT INTO {returns} VALUES (1)")
    counts = _pinned_unwritten(
        lh,
        f"SELECT id, (SELECT COUNT(*) FROM {returns} r WHERE r.oid = o.id) AS c FROM {orders} o",
        returns,
        written=orders,
    )
    assert sorted(tuple(r) for r in lh.spark.sql(counts).collect()) == [(1, 0), (2, 0)]
    summed = _pinned_unwritten(
        lh,
        f"SELECT g, SUM(CASE WHEN id IN (SELECT oid FROM {returns}) THEN amt END) AS r "
        f"FROM {orders} GROUP BY g",
        returns,
        written=orders,
    )
    assert [tuple(r) for r in lh.spark.sql(summed).collect()] == [(1, None)]
