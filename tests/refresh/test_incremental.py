"""A small aggregate's table is rewritten from its new state; the counts it records are
the rows that really changed, group by group."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.ivm import rules
from dyntables.refresh import apply, explain, planner
from tests.conftest import rows
from tests.oracle import assert_oracle


def _changed_rows(lh: Lakehouse, dt: str, before: int | None) -> tuple[int, int]:
    """(rows in the table now and not before, rows before and not now), as bags."""
    now = f"SELECT * FROM {dt}"
    old = f"SELECT * FROM {dt} VERSION AS OF {before}"
    inserted = lh.sql(f"SELECT count(*) FROM ({now} EXCEPT ALL {old})").first()[0]
    deleted = lh.sql(f"SELECT count(*) FROM ({old} EXCEPT ALL {now})").first()[0]
    return inserted, deleted


def _current(lh: Lakehouse, table: str) -> int | None:
    return load_table(lh.spark, lh.qualify(table)).current_snapshot_id()


def _refresh(lh: Lakehouse, dt: str) -> tuple[str, int, int]:
    out = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    return out.refresh_mode, out.rows_inserted, out.rows_deleted


def test_aggregate_counts_only_the_groups_whose_row_changed(lh: Lakehouse, unique) -> None:
    src, top, total = unique("src"), unique("top"), unique("total")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 5), ('b', 1), ('c', 2);
        CREATE DYNAMIC TABLE {top} AS SELECT k, MAX(v) AS top FROM {src} GROUP BY k;
        CREATE DYNAMIC TABLE {total} AS SELECT COUNT(*) AS n, MAX(v) AS top FROM {src}
        """
    )
    # a: a row below its MAX (no change); b: a new MAX; d: a new group; c: gone
    lh.sql(
        f"INSERT INTO {src} VALUES ('a', 3), ('b', 7), ('d', 1); DELETE FROM {src} WHERE k = 'c'"
    )
    before = _current(lh, top)
    assert _refresh(lh, top) == ("INCREMENTAL", 2, 2)
    assert _changed_rows(lh, top, before) == (2, 2)
    assert_oracle(lh, top)
    before = _current(lh, total)
    assert _refresh(lh, total) == ("INCREMENTAL", 1, 1)
    assert _changed_rows(lh, total, before) == (1, 1)
    assert_oracle(lh, total)

    # a row that changes no group's output: the state moves, the table keeps its snapshot
    lh.sql(f"INSERT INTO {src} VALUES ('a', 4)")
    before = _current(lh, top)
    assert _refresh(lh, top) == ("INCREMENTAL", 0, 0)
    assert _current(lh, top) == before
    assert_oracle(lh, top)
    lh.sql(f"INSERT INTO {src} VALUES ('a', 9)")  # the state above was kept: 9 is the MAX
    assert _refresh(lh, top) == ("INCREMENTAL", 1, 1)
    assert_oracle(lh, top)

    # every row deleted: the groups go, the global aggregate keeps its one row
    lh.sql(f"DELETE FROM {src}")
    assert _refresh(lh, top) == ("INCREMENTAL", 0, 3)
    assert_oracle(lh, top)
    assert _refresh(lh, total) == ("INCREMENTAL", 1, 1)
    assert lh.sql(f"SELECT n, top FROM {total}").collect() == [(0, None)]
    assert_oracle(lh, total)


def test_having_and_computed_columns_count_rows_entering_and_leaving(lh: Lakehouse, unique) -> None:
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('a', 2), ('b', 3), ('c', 4), ('c', 5);
        CREATE DYNAMIC TABLE {dt} AS SELECT upper(k) AS k, SUM(v) * 2 AS dbl FROM {src}
          GROUP BY k HAVING COUNT(*) > 1
        """
    )
    # b enters (a second row), c leaves (one row left), a changes its sum
    lh.sql(f"INSERT INTO {src} VALUES ('b', 1), ('a', 10); DELETE FROM {src} WHERE v = 5")
    before = _current(lh, dt)
    assert _refresh(lh, dt) == ("INCREMENTAL", 2, 2)
    assert _changed_rows(lh, dt, before) == (2, 2)
    assert_oracle(lh, dt)


def test_groups_that_swap_rows_leave_the_table_unchanged(lh: Lakehouse, unique) -> None:
    """Without the key among the columns, two groups can trade rows: the bag is the same,
    nothing was inserted or deleted."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('b', 1), ('b', 2);
        CREATE DYNAMIC TABLE {dt} AS SELECT COUNT(*) AS n FROM {src} GROUP BY k
        """
    )
    lh.sql(f"INSERT INTO {src} VALUES ('a', 2); DELETE FROM {src} WHERE k = 'b' AND v = 2")
    assert _refresh(lh, dt) == ("INCREMENTAL", 0, 0)
    assert_oracle(lh, dt)


def test_a_table_showing_its_whole_aggregate_is_rewritten_from_the_new_state(
    lh: Lakehouse, unique
) -> None:
    """Counts and exact sums, every key and aggregate among the columns: the new state is
    the old one plus the change summed by group, and the table is written from it."""
    src, dt, total, below = unique("src"), unique("dt"), unique("total"), unique("below")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT, d DECIMAL(10,2));
        INSERT INTO {src} VALUES ('a', 1, 1.50), ('a', 2, NULL), ('b', 3, 2.25), (NULL, 4, 0.10);
        CREATE DYNAMIC TABLE {dt} AS SELECT COUNT(*) AS n, k AS key, SUM(v) AS s, COUNT(d) AS nd,
          SUM(d) AS sd, AVG(d) AS ad, AVG(v) AS av FROM {src} GROUP BY k;
        CREATE DYNAMIC TABLE {total} AS SELECT COUNT(*) AS n, SUM(d) AS sd, AVG(d) AS ad FROM {src};
        CREATE DYNAMIC TABLE {below} AS SELECT key, n FROM {dt} WHERE n > 1
        """
    )
    rows = lh.sql(f"EXPLAIN DYNAMIC TABLE {dt}").collect()
    explained = dict((r.item, r.detail) for r in rows)
    assert "rewritten from the aggregate's new state" in explained["apply"]
    assert "agg0 new state" in explained
    operators = [r.detail for r in rows if r.item == "operator"]
    assert any("the table is rewritten from it" in o for o in operators), operators
    assert not any("-old/+new" in o for o in operators), operators
    # a new group, a row moved between groups, the NULL group's last row gone, b's last
    # non-null d gone (its SUM and AVG become NULL)
    lh.sql(
        f"""
        INSERT INTO {src} VALUES ('c', 5, 9.99), ('b', 6, NULL);
        UPDATE {src} SET k = 'b' WHERE k = 'a' AND v = 2;
        DELETE FROM {src} WHERE k IS NULL OR d = 2.25
        """
    )
    for table, changed in ((dt, (3, 3)), (total, (1, 1))):
        before = _current(lh, table)
        assert _refresh(lh, table) == ("INCREMENTAL", *changed)
        assert _changed_rows(lh, table, before) == changed
        assert_oracle(lh, table)
    assert lh.sql(f"SELECT n, s, nd, sd, ad FROM {dt} WHERE key = 'b'").collect() == [
        (2, 8, 0, None, None)
    ]
    assert _refresh(lh, below)[0] == "INCREMENTAL"
    # a change that leaves every group's row as it was: the table keeps its snapshot
    # and the layer below has nothing to do
    lh.sql(f"UPDATE {src} SET v = 8 - v WHERE k = 'b'")  # b's rows (2, 6) swap values
    before = _current(lh, dt)
    assert _refresh(lh, dt) == ("INCREMENTAL", 0, 0)
    assert _current(lh, dt) == before
    assert_oracle(lh, dt)
    assert _refresh(lh, below)[0] == "NO_DATA"
    # every row gone: the groups go, the global aggregate keeps its row
    lh.sql(f"DELETE FROM {src}")
    assert _refresh(lh, dt) == ("INCREMENTAL", 0, 3)
    assert _refresh(lh, total) == ("INCREMENTAL", 1, 1)
    assert lh.sql(f"SELECT * FROM {total}").collect() == [(0, None, None)]
    for table in (dt, total):
        assert_oracle(lh, table)


def _stats(lh: Lakehouse, dt: str) -> dict[str, str]:
    latest = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    return dict(json.loads(latest.stats))


def test_history_shows_what_spark_read_beside_what_was_captured(lh: Lakehouse, unique) -> None:
    """rows_read counts the captured change; input_rows everything Spark's stages read,
    so the whole other side of a join shows, and an aggregate's refresh reads little."""
    orders, products, enriched, totals = unique("o"), unique("p"), unique("e"), unique("t")
    lh.sql(
        f"""
        CREATE TABLE {products} AS SELECT id AS pid, id % 10 AS cat FROM range(1000);
        CREATE TABLE {orders} AS SELECT id AS oid, id % 1000 AS pid FROM range(1000);
        CREATE DYNAMIC TABLE {enriched} AS SELECT o.oid, p.cat FROM {orders} o
          JOIN {products} p ON o.pid = p.pid;
        CREATE DYNAMIC TABLE {totals} AS SELECT cat, COUNT(*) AS n FROM {enriched} GROUP BY cat
        """
    )
    lh.sql(f"INSERT INTO {orders} VALUES (1000, 7)")
    lh.sql(f"REFRESH DYNAMIC TABLE {enriched}")
    stats = _stats(lh, enriched)
    assert stats[f"rows_read.{orders}"] == "1"
    assert int(stats["input_rows"]) >= 1001  # the new order and every product it may join
    lh.sql(f"REFRESH DYNAMIC TABLE {totals}")
    stats = _stats(lh, totals)
    assert stats[f"rows_read.{enriched}"] == "1"
    # the new row, the 10 groups' state and the 10-row table: not the 1001 rows below
    assert 1 <= int(stats["input_rows"]) <= 50
    assert_oracle(lh, totals)


def test_a_large_join_side_is_read_only_where_the_change_can_meet_it(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """The change's key range is pushed into the scan of the join's unchanged side:
    Iceberg skips the files outside it, and the result is the same."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    big, small = unique("big"), unique("small")
    by_int, by_str, by_date = unique("by_int"), unique("by_str"), unique("by_date")
    lh.sql(f"CREATE TABLE {big} (k BIGINT, s STRING, d DATE, v DECIMAL(10,2))")
    for i in range(5):  # five files with disjoint key ranges
        lh.sql(
            f"INSERT INTO {big} SELECT id, concat('s', lpad(id, 6, '0')), date_add('2020-01-01', "
            f"CAST(id AS INT)), id / 100 FROM range({i * 1000}, {(i + 1) * 1000})"
        )
    lh.sql(
        f"""
        CREATE TABLE {small} (k BIGINT, s STRING, d DATE, tag STRING);
        INSERT INTO {small} VALUES (1, 's000001', DATE'2020-01-02', 'a'), (NULL, NULL, NULL, 'n');
        CREATE DYNAMIC TABLE {by_int} AS SELECT b.k, b.v, x.tag FROM {big} b JOIN {small} x ON b.k = x.k;
        CREATE DYNAMIC TABLE {by_str} AS SELECT b.k, x.tag FROM {big} b JOIN {small} x ON b.s = x.s;
        CREATE DYNAMIC TABLE {by_date} AS SELECT b.v, x.tag FROM {big} b
          JOIN (SELECT d AS day, tag FROM {small} WHERE tag <> 'skip') x ON b.d = x.day
        """
    )
    # new keys in the fourth file only, a NULL key, and a row that leaves (a changelog)
    lh.sql(
        f"""
        INSERT INTO {small} VALUES (3500, 's003500', DATE'2029-07-30', 'b'),
          (3501, 's003501', DATE'2029-07-31', 'c'), (NULL, NULL, NULL, 'm');
        """
    )
    for dt in (by_int, by_str, by_date):
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert int(_stats(lh, dt)["input_rows"]) < 2_000, dt  # one file of 1000, not 5000
        assert_oracle(lh, dt)
    lh.sql(f"UPDATE {small} SET k = 4999, s = 's004999', d = DATE'2033-09-09' WHERE tag = 'a'")
    for dt in (by_int, by_str, by_date):
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert_oracle(lh, dt)
    # a change on the large side: the small side is not worth a bounds job
    lh.sql(f"DELETE FROM {big} WHERE k = 3500")
    for dt in (by_int, by_str, by_date):
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert_oracle(lh, dt)


def test_an_outer_join_reads_its_large_side_only_at_the_changed_keys(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """A LEFT JOIN whose other side changed recomputes its output at the change's keys
    only: a large kept side (facts under a new dimension row) is read there once, and a
    large other side (facts under their dimension) only within its change's key range,
    old and new. Either way one file of the five, not the whole table."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    big, small = unique("big"), unique("small")
    facts_kept, dims_kept, dims_kept_right = unique("fk"), unique("dk"), unique("dkr")
    lh.sql(f"CREATE TABLE {big} (k BIGINT, v DECIMAL(10,2))")
    for i in range(5):  # five files with disjoint key ranges
        lh.sql(f"INSERT INTO {big} SELECT id, id / 100 FROM range({i * 1000}, {(i + 1) * 1000})")
    lh.sql(
        f"""
        CREATE TABLE {small} (k BIGINT, tag STRING);
        INSERT INTO {small} VALUES (1, 'a'), (3400, 'b'), (3450, 'c'), (NULL, 'n');
        CREATE DYNAMIC TABLE {facts_kept} AS SELECT x.tag, COUNT(*) AS n, SUM(b.v) AS v
          FROM {big} b LEFT JOIN {small} x ON b.k = x.k GROUP BY x.tag;
        CREATE DYNAMIC TABLE {dims_kept} AS
          SELECT x.k, x.tag, b.v FROM {small} x LEFT JOIN {big} b ON x.k = b.k AND b.v > 34.2;
        CREATE DYNAMIC TABLE {dims_kept_right} AS
          SELECT x.tag, b.v FROM {big} b RIGHT JOIN {small} x ON b.k = x.k
        """
    )
    # facts gain a partner, lose one (padded again), change partner; a NULL key comes
    lh.sql(
        f"""
        INSERT INTO {small} VALUES (3500, 'd'), (NULL, 'm');
        DELETE FROM {small} WHERE k = 3400;
        UPDATE {small} SET tag = 'c2' WHERE k = 3450
        """
    )
    for dt in (facts_kept, dims_kept, dims_kept_right):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    # one file of big (the table itself is a few groups, rewritten whole)
    assert int(_stats(lh, facts_kept)["input_rows"]) < 2_000
    # the large side changes in one file's range: a partner appears, one goes
    lh.sql(f"INSERT INTO {big} VALUES (3500, 2.5), (3600, 99.0), (3450, 40.0)")
    for dt in (facts_kept, dims_kept, dims_kept_right):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
        if dt != facts_kept:
            assert int(_stats(lh, dt)["input_rows"]) < 3_000, dt  # not big twice (10k)
    lh.sql(f"DELETE FROM {big} WHERE k IN (3450, 3500)")
    for dt in (facts_kept, dims_kept, dims_kept_right):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)


def test_a_band_join_refreshes_incrementally(lh: Lakehouse, unique) -> None:
    """A LEFT JOIN with no equality (each order's price tier by range): new orders are
    matched against the tiers alone; a tier that changes matches every order again,
    old and new, still without a recompute. EXISTS with no equality likewise."""
    orders, tiers, tiered, priced = unique("o"), unique("tiers"), unique("tiered"), unique("pr")
    lh.sql(f"CREATE TABLE {orders} (id BIGINT, amount DECIMAL(10,2))")
    for i in range(5):
        lh.sql(f"INSERT INTO {orders} SELECT id, id % 300 FROM range({i * 200}, {(i + 1) * 200})")
    lh.sql(
        f"""
        CREATE TABLE {tiers} (tier STRING, lo DECIMAL(10,2), hi DECIMAL(10,2));
        INSERT INTO {tiers} VALUES ('small', 0, 100), ('mid', 100, 200), ('mid', 100, 200);
        CREATE DYNAMIC TABLE {tiered} AS SELECT o.id, t.tier FROM {orders} o
          LEFT JOIN {tiers} t ON o.amount >= t.lo AND o.amount < t.hi;
        CREATE DYNAMIC TABLE {priced} AS SELECT o.id FROM {orders} o
          WHERE EXISTS (SELECT 1 FROM {tiers} t WHERE t.hi > o.amount AND t.tier <> 'small')
        """
    )
    explained = dict(
        (r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {tiered}").collect()
    )
    assert explained["decision"] == "INCREMENTAL"
    lh.sql(f"INSERT INTO {orders} VALUES (1000, 50), (1001, 150), (1002, 250), (1003, NULL)")
    for dt in (tiered, priced):
        rows = lh.sql(f"SELECT count(*) FROM {dt}").first()[0]
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        # the table (small, so rewritten whole), the new orders and the tiers: not the
        # 1,000 orders before them
        assert int(_stats(lh, dt)["input_rows"]) < rows + 100
        assert_oracle(lh, dt)
    # the large tier arrives, a duplicate leaves, the small tier narrows
    lh.sql(
        f"""
        INSERT INTO {tiers} VALUES ('large', 200, 1000);
        DELETE FROM {tiers} WHERE tier = 'mid';
        INSERT INTO {tiers} VALUES ('mid', 100, 200);
        UPDATE {tiers} SET hi = 50 WHERE tier = 'small'
        """
    )
    for dt in (tiered, priced):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {tiered} WHERE tier IS NULL").first()[0] > 0
    lh.sql(f"DELETE FROM {tiers}")
    for dt in (tiered, priced):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {priced}").first()[0] == 0


def test_a_generator_refreshes_from_the_changed_rows_alone(lh: Lakehouse, unique) -> None:
    """Tags exploded into rows (an ODS -> DWD step): new events generate only their own
    rows, appended without reading the table or the older events; an event corrected
    or deleted takes its generated rows with it."""
    events, tags, exploded = unique("ev"), unique("tags"), unique("ex")
    lh.sql(
        f"""
        CREATE TABLE {events} (id BIGINT, tags STRING);
        INSERT INTO {events} SELECT id, concat('t', id % 7, ',t', id % 3) FROM range(0, 1000);
        CREATE DYNAMIC TABLE {tags} AS SELECT e.id, g.pos, g.tag FROM {events} e
          LATERAL VIEW OUTER posexplode(split(e.tags, ',')) g AS pos, tag;
        CREATE DYNAMIC TABLE {exploded} AS SELECT id, explode(split(tags, ',')) AS tag
          FROM {events} WHERE id % 2 = 0
        """
    )
    lh.sql(f"INSERT INTO {events} VALUES (1000, 'a,b,c'), (1001, NULL), (1002, '')")
    for dt in (tags, exploded):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert int(_stats(lh, dt)["input_rows"]) == 3  # the new events, nothing else
        assert_oracle(lh, dt)
    lh.sql(
        f"UPDATE {events} SET tags = 'x' WHERE id IN (2, 1000); DELETE FROM {events} WHERE id = 4"
    )
    for dt in (tags, exploded):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {tags} WHERE id = 1000").first()[0] == 1


def test_a_map_column_of_the_table_is_maintained_from_the_changed_rows(
    lh: Lakehouse, unique
) -> None:
    """An ODS table's attributes MAP kept whole by the DWD layer (``SELECT *`` with a
    filter), beside a MAP the query builds: Spark cannot group or compare a MAP, so the
    delta carries each as its entries and the table's rows are matched by theirs. New
    events are appended without reading the table; an event whose MAP is corrected, or
    deleted, replaces exactly its row (a twin with the same entries in another order
    stays)."""
    events, kept, built = unique("ev"), unique("kept"), unique("built")
    lh.sql(
        f"""
        CREATE TABLE {events} (id BIGINT, attrs MAP<STRING, STRING>, n INT);
        INSERT INTO {events} SELECT id, map('src', concat('s', id % 3), 'dev', 'ios'), CAST(id AS INT)
          FROM range(0, 1000);
        INSERT INTO {events} VALUES (1000, map('src', 's1'), 1000), (8, map('dev', 'ios', 'src', 's2'), 8);
        CREATE DYNAMIC TABLE {kept} AS SELECT * FROM {events} WHERE n % 2 = 0;
        CREATE DYNAMIC TABLE {built} AS SELECT id, map('n', n, 'tens', n DIV 10) AS parts,
          map_concat(attrs, map('id', CAST(id AS STRING))) AS tagged FROM {events}
        """
    )
    explained = dict((r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {built}").collect())
    assert explained["decision"] == "INCREMENTAL"
    assert explained["map columns"].startswith(
        "parts, tagged: carried by the delta as their entries"
    )
    lh.sql(f"INSERT INTO {events} VALUES (1002, NULL, 1002), (1004, map(), 1004)")
    for dt in (kept, built):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert int(_stats(lh, dt)["input_rows"]) == 2  # the new events, nothing else
        assert_oracle(lh, dt)
    lh.sql(
        f"UPDATE {events} SET attrs = map('src', 'web') WHERE id IN (4, 1000); "
        f"DELETE FROM {events} WHERE id IN (6, 1004) OR (id = 8 AND map_keys(attrs)[0] = 'dev')"
    )
    for dt in (kept, built):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    got = lh.sql(f"SELECT id, map_keys(attrs) FROM {kept} WHERE id IN (4, 8, 1000, 1002)")
    assert sorted(tuple(r) for r in got.collect()) == [
        (4, ["src"]),
        (8, ["src", "dev"]),  # its twin in another order is the row that went
        (1000, ["src"]),
        (1002, None),
    ]


def test_an_unnamed_generator_is_maintained_under_the_names_spark_gives_it(
    lh: Lakehouse, unique
) -> None:  # type: ignore[no-untyped-def]
    """``SELECT id, explode(tags) FROM events``: Spark names the generated column ``col``
    (``pos``/``key``/``value``, a struct's fields, ``col0``..., ``c0``... for the other
    generators and arguments); the table has those columns, a query around it reads
    them by those names, and both refresh from the changed rows alone."""
    events, exploded, inlined, tupled = unique("ev"), unique("ex"), unique("in"), unique("tu")
    picked = unique("pk")
    lh.sql(
        f"""
        CREATE TABLE {events} (id BIGINT, tags ARRAY<STRING>,
          pairs ARRAY<STRUCT<name: STRING, score: INT>>, doc STRING);
        INSERT INTO {events} SELECT id, array(concat('t', id % 3), 'x'),
          array(named_struct('name', 'n', 'score', CAST(id % 5 AS INT))),
          concat('{{"a": ', id, ', "b": "', id % 2, '"}}') FROM range(0, 50);
        CREATE DYNAMIC TABLE {exploded} AS
          SELECT id, explode(tags), 1 AS one FROM {events} WHERE id % 2 = 0;
        CREATE DYNAMIC TABLE {inlined} AS SELECT id, inline_outer(pairs) FROM {events};
        CREATE DYNAMIC TABLE {tupled} AS SELECT id, json_tuple(doc, 'a', 'b') FROM {events};
        CREATE DYNAMIC TABLE {picked} AS SELECT g.id, upper(g.col) AS tag
          FROM (SELECT id, explode(tags) FROM {events}) AS g WHERE g.col <> 'x'
        """
    )
    assert lh.spark.table(exploded).columns == ["id", "col", "one"]
    assert lh.spark.table(inlined).columns == ["id", "name", "score"]
    assert lh.spark.table(tupled).columns == ["id", "c0", "c1"]
    lh.sql(f"INSERT INTO {events} SELECT 100, array('n'), NULL, NULL")
    for dt in (exploded, inlined, tupled, picked):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert int(_stats(lh, dt)["input_rows"]) == 1  # the new event, nothing else
        assert_oracle(lh, dt)
    lh.sql(f"UPDATE {events} SET tags = array('y', 'z', 'w'), doc = '{{}}' WHERE id IN (2, 3)")
    lh.sql(f"DELETE FROM {events} WHERE id = 4")
    for dt in (exploded, inlined, tupled, picked):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {exploded} WHERE id = 2").first()[0] == 3


def test_deletes_in_a_large_table_read_only_the_files_they_can_be_in(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """Rows leaving a table too large to rewrite are MERGEd out; the MERGE compares only
    the table's rows within the leaving values' column ranges, so Iceberg skips the
    other files (recent orders corrected: the old ones are not read)."""
    monkeypatch.setattr(apply, "SINGLE_JOB_MAX_ROWS", 0)  # as if the table were large
    monkeypatch.setattr(apply, "REWRITE_MAX_ROWS", 0)
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (id BIGINT, tag STRING, v DECIMAL(10,2), ts TIMESTAMP);
        INSERT INTO {src} SELECT id, IF(id % 7 = 0, NULL, 't'), id / 10,
          timestamp_micros(id * 1000003) FROM range(0, 1000);
        CREATE DYNAMIC TABLE {dt} AS SELECT id, tag, v * 2 AS v2, ts FROM {src} WHERE v >= 0
        """
    )
    for i in range(1, 5):  # each refresh appends one file: five disjoint id ranges
        lh.sql(
            f"INSERT INTO {src} SELECT id, IF(id % 7 = 0, NULL, 't'), id / 10, "
            f"timestamp_micros(id * 1000003) FROM range({i * 1000}, {(i + 1) * 1000})"
        )
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    # corrections of recent rows: one moved, one gone, one with a NULL tag gone
    lh.sql(f"UPDATE {src} SET v = v + 1 WHERE id = 4500")
    lh.sql(f"DELETE FROM {src} WHERE id IN (4501, 4508)")
    assert _refresh(lh, dt) == ("INCREMENTAL", 1, 3)
    # read: the source's change (its file of ids 4000-4999, removed and added by each of
    # the two commits) and, of the table, only its file of the same ids (5,006 rows
    # here; 13,006 when the MERGE compares every file of the table)
    assert int(_stats(lh, dt)["input_rows"]) < 8_000
    assert_oracle(lh, dt)
    # a leaving row whose every value is NULL but its id still prunes; the rest is exact
    lh.sql(f"INSERT INTO {src} VALUES (5000, NULL, NULL, NULL), (5001, NULL, 1.5, NULL)")
    assert _refresh(lh, dt)[0] == "INCREMENTAL"
    lh.sql(f"DELETE FROM {src} WHERE id IN (5001, 4000, 1)")
    assert _refresh(lh, dt) == ("INCREMENTAL", 0, 3)
    assert_oracle(lh, dt)


def test_auto_recomputes_a_join_whose_change_spans_the_other_side(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """A join's delta reads its unchanged side within the change's key range. New keys
    in one corner of it: AUTO stays incremental. New keys at both ends: the delta would
    read all of it, as recomputing does, so AUTO recomputes (DELTA_READS_TOO_MUCH, the
    estimate in stats); REFRESH_MODE = INCREMENTAL keeps the rule."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    monkeypatch.setattr(planner, "FULL_MIN_ROWS", 1_000)
    big, small, auto, inc = unique("big"), unique("small"), unique("auto"), unique("inc")
    lh.sql(f"CREATE TABLE {big} (k BIGINT, v DECIMAL(10,2))")
    for i in range(5):  # five files with disjoint key ranges
        lh.sql(f"INSERT INTO {big} SELECT id, id / 100 FROM range({i * 1000}, {(i + 1) * 1000})")
    join = f"SELECT b.k, b.v, x.tag FROM {big} b JOIN {small} x ON b.k = x.k"
    lh.sql(
        f"""
        CREATE TABLE {small} (k BIGINT, tag STRING);
        INSERT INTO {small} VALUES (1, 'a');
        CREATE DYNAMIC TABLE {auto} REFRESH_MODE = AUTO AS {join};
        CREATE DYNAMIC TABLE {inc} REFRESH_MODE = INCREMENTAL AS {join}
        """
    )
    explained = dict((r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {auto}").collect())
    assert "DELTA_READS_TOO_MUCH" in explained["auto"]
    # the change's key range, which the refresh reads first, as parameters
    assert f"BETWEEN :delta_{small}_k_min AND :delta_{small}_k_max" in explained["delta sql"]
    assert "auto" not in dict(
        (r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {inc}").collect()
    )
    lh.sql(f"INSERT INTO {small} VALUES (3500, 'b'), (3501, 'c')")
    assert _refresh(lh, auto)[0] == "INCREMENTAL"
    stats = _stats(lh, auto)
    assert int(stats["estimate.full_read_rows"]) >= 5_000
    assert int(stats["estimate.delta_read_rows"]) < 2_000  # one file of big, not five
    assert _refresh(lh, inc)[0] == "INCREMENTAL"

    before = _current(lh, auto)
    lh.sql(f"INSERT INTO {small} VALUES (10, 'd'), (4990, 'e')")
    assert _refresh(lh, auto)[0] == "FULL"
    stats = _stats(lh, auto)
    assert stats["full_reason"] == "DELTA_READS_TOO_MUCH"
    assert int(stats["estimate.delta_read_rows"]) >= 5_000
    assert _current(lh, auto) != before
    assert _refresh(lh, inc)[0] == "INCREMENTAL"
    for dt in (auto, inc):
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {auto}").first()[0] == 5
    # a change of the big side reads the small one whole: nothing to weigh
    lh.sql(f"INSERT INTO {big} VALUES (7000, 1.5), (3500, 2.5)")
    assert _refresh(lh, auto)[0] == "INCREMENTAL"
    assert "estimate.delta_read_rows" not in _stats(lh, auto)
    assert_oracle(lh, auto)


def test_rows_tied_in_a_deduplication_are_ranked_the_same_every_time(lh: Lakehouse, unique) -> None:
    """Two versions of an id with the same timestamp: Spark numbers them in whichever
    order it reads them, and a refresh recomputing the id as it was read them in another
    order than the build had, removed the row the table did not keep and kept a deleted
    one (or, caught, recomputed FULL). Tied rows are now ranked by their values too, the
    same in the build and in every refresh."""
    log, latest, top = unique("log"), unique("latest"), unique("top")
    lh.sql(f"CREATE TABLE {log} (id INT, ts INT, v STRING)")
    for v in ("b", "a", "c"):  # one file each
        lh.sql(f"INSERT INTO {log} VALUES (1, 1, '{v}'), (2, 1, '{v}')")
    lh.sql(
        f"""
        CREATE DYNAMIC TABLE {latest} AS SELECT id, v FROM (SELECT id, v, ROW_NUMBER() OVER
          (PARTITION BY id ORDER BY ts DESC) AS rn FROM {log}) AS r WHERE rn = 1;
        CREATE DYNAMIC TABLE {top} REFRESH_MODE = INCREMENTAL AS
          SELECT id, v FROM {log} WHERE id = 1 ORDER BY ts LIMIT 1
        """
    )
    for step in range(3):
        # the version each table kept goes, and another of the same time comes
        held = {
            r.v
            for r in lh.sql(
                f"SELECT v FROM {latest} WHERE id = 1 UNION SELECT v FROM {top}"
            ).collect()
        }
        for v in sorted(held):
            lh.sql(f"DELETE FROM {log} WHERE id = 1 AND v = '{v}'")
            lh.sql(f"INSERT INTO {log} VALUES (1, 1, '{v}{step}')")
        for dt in (latest, top):
            assert _refresh(lh, dt)[0] == "INCREMENTAL", dt
            kept = rows(lh.sql(f"SELECT v FROM {dt} WHERE id = 1"))
            assert len(kept) == 1 and kept[0][0] not in held, (dt, step, kept, held)
            assert lh.sql(f"SELECT 1 FROM {log} WHERE id = 1 AND v = '{kept[0][0]}'").count() == 1
        assert rows(lh.sql(f"SELECT * FROM {latest} WHERE id = 2")) == [(2, "a")]


def test_values_read_in_order_survive_a_compaction(lh: Lakehouse, unique) -> None:
    """A list collected over a partition, its first (last so far) value, a MAX_BY whose
    orderings all tie, a DOUBLE sum that rounds in the order it adds: each is whatever
    Spark reads first, or how it reads the partition's rows (or, over the default RANGE
    frame with ORDER BY, a row's tied peers). A compaction puts the rows in another
    order, so a refresh recomputing the touched partition as it was got other rows than
    the table held and fell back to FULL (the table and the delta disagreed), and
    LAST_VALUE refreshed FULL (WINDOW_TIES). Ordered by every column the query uses (over
    tied peers: running in that order, each peer taking the value at the last of them),
    the build and every recomputation read them the same way."""
    src, whole, so_far = unique("events"), unique("per_k"), unique("so_far")
    lh.sql(f"CREATE TABLE {src} (k INT, n INT, ts INT, v DOUBLE)")
    for n, ts, v in ((5, 1, 1e16), (7, 1, 1.0), (3, 2, -1e16), (8, 2, 1.0), (2, 2, 0.5)):
        lh.sql(f"INSERT INTO {src} VALUES (1, {n}, {ts}, {v}), (2, {n}, {ts}, {v})")
    over = {whole: "PARTITION BY k", so_far: "PARTITION BY k ORDER BY ts"}
    queries = {
        dt: f"""SELECT k, n, ts, collect_list(n) OVER ({w}) AS ns,
                   {"first" if dt == whole else "last_value"}(n) OVER ({w}) AS f,
                   max_by(n, k) OVER ({w}) AS m, sum(v) OVER ({w}) AS s
                FROM {src}"""
        for dt, w in over.items()
    }
    for dt, query in queries.items():
        lh.sql(f"CREATE DYNAMIC TABLE {dt} AS {query}")
    lh.sql(
        f"CALL lakehouse.system.rewrite_data_files(table => 'public.{src}', "
        "options => map('min-input-files', '2'))"
    )
    lh.sql(f"INSERT INTO {src} VALUES (1, 1, 2, 2.0)")
    assert _refresh(lh, whole) == ("INCREMENTAL", 6, 5)
    assert _refresh(lh, so_far) == ("INCREMENTAL", 4, 3)  # ts = 1's rows keep theirs
    for dt, query in queries.items():  # what a build from scratch holds now
        twin = unique("twin")
        lh.sql(f"CREATE DYNAMIC TABLE {twin} AS {query}")
        assert rows(lh.sql(f"SELECT * FROM {dt}")) == rows(lh.sql(f"SELECT * FROM {twin}"))
    # and the values are the query's, up to the order it has none of: over the partition,
    # or up to a row's last peer (its last value one of its peers')
    picked = (
        "SELECT DISTINCT k, {}, array_join(sort_array(ns), ','), array_contains(ns, f), "
        "array_contains(ns, m) FROM {}"
    )
    peers = "ts = 1 AND f IN (5, 7) OR ts = 2 AND f NOT IN (5, 7)"
    assert rows(lh.sql(picked.format("ts = 2", whole))) == [
        (1, False, "1,2,3,5,7,8", True, True),
        (1, True, "1,2,3,5,7,8", True, True),
        (2, False, "2,3,5,7,8", True, True),
        (2, True, "2,3,5,7,8", True, True),
    ]
    assert rows(lh.sql(picked.format(peers, so_far) + " WHERE ts = 1")) == [
        (1, True, "5,7", True, True),
        (2, True, "5,7", True, True),
    ]
    assert rows(lh.sql(picked.format(peers, so_far) + " WHERE ts = 2")) == [
        (1, True, "1,2,3,5,7,8", True, True),
        (2, True, "2,3,5,7,8", True, True),
    ]


def test_a_deduplication_reads_the_partitions_the_change_touches(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """``ROW_NUMBER() OVER (PARTITION BY id ...) = 1`` recomputes the ids the change
    touches, reading a large input only within the change's range of ids (NULL ids, a
    partition of their own, kept): new versions of recent ids read one file of five, not
    the whole history twice. Changes at both ends of the ids would read all of it twice:
    AUTO recomputes (DELTA_READS_TOO_MUCH), REFRESH_MODE = INCREMENTAL keeps the rule."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    monkeypatch.setattr(planner, "FULL_MIN_ROWS", 1_000)
    log, auto, inc = unique("log"), unique("latest"), unique("latest_inc")
    lh.sql(f"CREATE TABLE {log} (id BIGINT, ts BIGINT, v STRING)")
    for i in range(5):  # five files with disjoint id ranges, two versions of each id
        lh.sql(
            f"INSERT INTO {log} SELECT id DIV 2, id, CAST(id AS STRING) "
            f"FROM range({i * 1000}, {(i + 1) * 1000})"
        )
    lh.sql(f"INSERT INTO {log} VALUES (NULL, 1, 'n1'), (NULL, 2, 'n2')")
    latest = (
        "SELECT id, ts, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) "
        f"AS rn FROM {log}) WHERE rn = 1"
    )
    lh.sql(
        f"""
        CREATE DYNAMIC TABLE {auto} AS {latest};
        CREATE DYNAMIC TABLE {inc} REFRESH_MODE = INCREMENTAL AS {latest}
        """
    )
    explained = dict((r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {auto}").collect())
    assert "a window's delta would read" in explained["auto"]
    assert f"BETWEEN :delta_{log}_id_min AND :delta_{log}_id_max" in explained["delta sql"]

    # new versions of two recent ids, and a new NULL-id row (the NULL partition re-ranked)
    lh.sql(f"INSERT INTO {log} VALUES (2300, 9000, 'x'), (2400, 9001, 'y'), (NULL, 3, 'n3')")
    assert _refresh(lh, auto) == ("INCREMENTAL", 3, 3)
    stats = _stats(lh, auto)
    assert int(stats["estimate.full_read_rows"]) >= 5_000
    assert int(stats["estimate.delta_read_rows"]) < 2 * 1_100  # one file of five, old and new
    # that file old and new, the change, and the table's own 2,501 rows (a small table is
    # rewritten with its delta); unpruned, the log alone would be read twice (10,004)
    assert int(stats["input_rows"]) < 5_000
    assert _refresh(lh, inc) == ("INCREMENTAL", 3, 3)
    for dt in (auto, inc):
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT v FROM {auto} WHERE id IS NULL").collect() == [("n3",)]

    # the first and the last id: every file, twice
    lh.sql(f"INSERT INTO {log} VALUES (0, 9002, 'first'), (2499, 9003, 'last')")
    assert _refresh(lh, auto)[0] == "FULL"
    assert _stats(lh, auto)["full_reason"] == "DELTA_READS_TOO_MUCH"
    assert _refresh(lh, inc)[0] == "INCREMENTAL"
    # the NULL partition loses its rows, a deleted id loses its latest version
    lh.sql(f"DELETE FROM {log} WHERE id IS NULL OR ts = 9001")
    assert _refresh(lh, inc)[0] == "INCREMENTAL"
    for dt in (auto, inc):
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {inc} WHERE id IS NULL").first()[0] == 0
    assert lh.sql(f"SELECT v FROM {inc} WHERE id = 2400").collect() == [("4801",)]


def test_a_deleted_maximum_is_recomputed_from_the_files_of_its_group(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """A group whose MAX is deleted is recomputed from the input, read only within the
    change's range of the group key: one file of five."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    src, dt = unique("readings"), unique("peaks")
    lh.sql(f"CREATE TABLE {src} (day INT, v BIGINT)")
    for i in range(5):  # five files with disjoint days
        lh.sql(f"INSERT INTO {src} SELECT id DIV 100, id FROM range({i * 1000}, {(i + 1) * 1000})")
    lh.sql(
        f"CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS "
        f"SELECT day, MAX(v) AS peak, COUNT(*) AS n FROM {src} GROUP BY day"
    )
    lh.sql(f"DELETE FROM {src} WHERE v = 4599")  # day 45's peak
    assert _refresh(lh, dt) == ("INCREMENTAL", 1, 1)
    stats = _stats(lh, dt)
    assert stats["agg0.recomputed_groups"] == "1"
    # the change and that file again (2,155 rows when written), not all five files
    assert int(stats["input_rows"]) < 4_000
    assert_oracle(lh, dt)
    assert lh.sql(f"SELECT peak FROM {dt} WHERE day = 45").collect() == [(4598,)]


def test_a_standard_deviation_is_recomputed_for_the_groups_the_change_touches(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """STDDEV and MEDIAN keep no running state: every group the change touches is
    recomputed from the input, read within the change's range of days (one file of
    five). Changes on the first and the last day would read all of it: AUTO recomputes
    (DELTA_READS_TOO_MUCH), REFRESH_MODE = INCREMENTAL keeps the rule."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    monkeypatch.setattr(planner, "FULL_MIN_ROWS", 1_000)
    src, auto, inc = unique("readings"), unique("spread"), unique("spread_inc")
    lh.sql(f"CREATE TABLE {src} (day INT, v DOUBLE)")
    for i in range(5):  # five files with disjoint days
        lh.sql(
            f"INSERT INTO {src} SELECT id DIV 100, id % 7 FROM range({i * 1000}, {(i + 1) * 1000})"
        )
    spread = (
        "SELECT day, STDDEV(v) AS sd, MEDIAN(v) AS med, BOOL_AND(v < 6) AS low, "
        f"COUNT(*) AS n FROM {src} GROUP BY day"
    )
    lh.sql(
        f"""
        CREATE DYNAMIC TABLE {auto} AS {spread};
        CREATE DYNAMIC TABLE {inc} REFRESH_MODE = INCREMENTAL AS {spread}
        """
    )
    lines = lh.sql(f"EXPLAIN DYNAMIC TABLE {auto}").collect()
    assert any(
        "BOOL_AND, MEDIAN, STDDEV recomputed for every touched group" in r.detail for r in lines
    )
    explained = dict((r.item, r.detail) for r in lines)
    assert "an aggregate's recompute of its touched groups" in explained["auto"]

    lh.sql(f"INSERT INTO {src} VALUES (45, 100.0), (46, -3.5)")
    assert _refresh(lh, auto) == ("INCREMENTAL", 2, 2)
    stats = _stats(lh, auto)
    assert stats["agg0.recomputed_groups"] == "2"
    assert int(stats["estimate.delta_read_rows"]) < 1_100  # one file of five
    assert int(stats["estimate.full_read_rows"]) >= 5_000
    assert _refresh(lh, inc) == ("INCREMENTAL", 2, 2)

    lh.sql(f"INSERT INTO {src} VALUES (0, 1.0), (49, 2.0)")
    assert _refresh(lh, auto)[0] == "FULL"
    assert _stats(lh, auto)["full_reason"] == "DELTA_READS_TOO_MUCH"
    assert _refresh(lh, inc)[0] == "INCREMENTAL"
    # a day loses all its rows, another one of its values
    lh.sql(f"DELETE FROM {src} WHERE day = 45 OR (day = 46 AND v = -3.5)")
    for dt in (auto, inc):
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)
    assert lh.sql(f"SELECT count(*) FROM {inc} WHERE day = 45").first()[0] == 0


def test_collections_and_distinct_estimates_are_recomputed_for_touched_groups(
    lh: Lakehouse, unique
) -> None:
    """A tag list per user (SORT_ARRAY(COLLECT_SET)), its length, a joined list of
    duplicates kept, an estimated distinct count, and lists in the order Spark reads the
    rows: a touched group is recomputed and the others keep theirs. A value moved to
    another group, a group's last row deleted, duplicates, NULLs, an empty global list."""
    src, per_user, overall = unique("visits"), unique("tags"), unique("all_tags")
    unsorted = unique("unsorted")
    lh.sql(
        f"""
        CREATE TABLE {src} (u STRING, tag STRING, page INT);
        INSERT INTO {src} VALUES ('ann', 'b', 1), ('ann', 'a', 2), ('ann', 'b', 3),
          ('bob', 'c', 1), ('bob', NULL, 2), ('cy', 'a', 7);
        CREATE DYNAMIC TABLE {per_user} AS
          SELECT u, sort_array(collect_set(tag)) AS tags, size(collect_set(tag)) AS n_tags,
                 array_join(array_sort(collect_list(tag)), ',') AS seen,
                 approx_count_distinct(page) AS pages
          FROM {src} GROUP BY u;
        CREATE DYNAMIC TABLE {overall} AS
          SELECT sort_array(collect_list(page) FILTER (WHERE tag IS NOT NULL), false) AS pages
          FROM {src};
        CREATE DYNAMIC TABLE {unsorted} AS
          SELECT u, collect_list(page) AS pages, collect_set(tag) AS tags FROM {src} GROUP BY u
        """
    )
    # lists in the order Spark reads the rows: the query's answer up to that order
    sorted_lists = "SELECT u, sort_array(pages), sort_array(tags) FROM ({}) AS q"
    as_queried = (
        f"SELECT u, collect_list(page) AS pages, collect_set(tag) AS tags FROM {src} GROUP BY u"
    )
    lines = lh.sql(f"EXPLAIN DYNAMIC TABLE {per_user}").collect()
    assert any(
        "APPROX_COUNT_DISTINCT, COLLECT_LIST, COLLECT_SET recomputed for every touched group"
        in r.detail
        for r in lines
    ), [r.detail for r in lines]
    assert rows(lh.sql(f"SELECT u, tags, n_tags, seen, pages FROM {per_user}")) == [
        ("ann", ["a", "b"], 2, "a,b,b", 3),
        ("bob", ["c"], 1, "c", 2),
        ("cy", ["a"], 1, "a", 1),
    ]
    batches = [
        f"INSERT INTO {src} VALUES ('bob', 'a', 9), ('dee', 'z', 1)",
        f"UPDATE {src} SET u = 'bob' WHERE u = 'ann' AND tag = 'a'",  # moves a value
        f"DELETE FROM {src} WHERE u = 'cy'",  # a group's last row
        f"UPDATE {src} SET tag = NULL WHERE u = 'dee'",
        f"DELETE FROM {src}",  # the global list becomes empty
    ]
    for batch in batches:
        lh.sql(batch)
        for dt in (per_user, overall):
            assert _refresh(lh, dt)[0] == "INCREMENTAL", batch
            assert_oracle(lh, dt)
        if batch.startswith("INSERT"):  # ann and cy kept theirs
            assert _stats(lh, per_user)["agg0.recomputed_groups"] == "2"
        assert _refresh(lh, unsorted)[0] == "INCREMENTAL", batch
        assert rows(lh.sql(sorted_lists.format(f"SELECT * FROM {unsorted}"))) == rows(
            lh.sql(sorted_lists.format(as_queried))
        )
    assert lh.sql(f"SELECT count(*) FROM {per_user}").first()[0] == 0
    assert lh.sql(f"SELECT pages FROM {overall}").first()[0] == []


def test_aggregates_of_distinct_values_are_recomputed_for_touched_groups(
    lh: Lakehouse, unique
) -> None:
    """SUM/AVG(DISTINCT x) and COUNT(DISTINCT a, b): deleting one copy of a duplicated
    value leaves the distinct values as they were, deleting the last one changes them;
    only the recomputed group tells which."""
    src, dt = unique("payments"), unique("distinct_sums")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, k STRING, n INT, d DECIMAL(10,2));
        INSERT INTO {src} VALUES (1, 'a', 1, 1.50), (2, 'a', 1, 1.50), (3, 'a', 2, NULL),
          (4, 'b', 5, 2.00), (5, 'c', NULL, 3.00);
        CREATE DYNAMIC TABLE {dt} AS
          SELECT k, SUM(DISTINCT n) AS s, AVG(DISTINCT d) AS a, COUNT(DISTINCT n, d) AS c
          FROM {src} GROUP BY k
        """
    )
    lines = lh.sql(f"EXPLAIN DYNAMIC TABLE {dt}").collect()
    assert any(
        "AVG(DISTINCT), COUNT(DISTINCT), SUM(DISTINCT) recomputed" in r.detail for r in lines
    ), [r.detail for r in lines]
    batches = [
        f"DELETE FROM {src} WHERE id = 1",  # one copy of a's (1, 1.50): a's values stay
        f"INSERT INTO {src} VALUES (6, 'b', 5, 2.00), (7, 'b', 6, 2.00), (8, 'd', 1, 1.00)",
        f"UPDATE {src} SET k = 'c' WHERE k = 'a' AND n = 2",  # a value moves
        f"DELETE FROM {src} WHERE k = 'a'",  # the group goes
    ]
    for batch in batches:
        lh.sql(batch)
        assert _refresh(lh, dt)[0] == "INCREMENTAL", batch
        assert_oracle(lh, dt)
    assert rows(lh.sql(f"SELECT k, s, a, c FROM {dt}")) == [
        ("b", 11, 2.0, 2),
        ("c", 2, 3.0, 0),
        ("d", 1, 1.0, 1),
    ]


def test_values_picked_from_a_groups_rows_are_recomputed_for_touched_groups(
    lh: Lakehouse, unique
) -> None:
    """The latest status of each order (MAX_BY over its updates), its first status
    (MIN_BY), its customer (ANY_VALUE, FIRST IGNORE NULLS with a FILTER: one per order),
    the commonest status and an approximate median per customer: a new update,
    the latest one deleted (the one before is latest again), an order moved to another
    customer, a customer's last order gone."""
    src, latest, per_customer = unique("updates"), unique("latest"), unique("per_customer")
    lh.sql(
        f"""
        CREATE TABLE {src} (order_id INT, customer STRING, status STRING, ts INT, amount INT);
        INSERT INTO {src} VALUES (1, 'ann', 'created', 1, 10), (1, 'ann', 'paid', 2, 10),
          (2, 'ann', 'created', 1, 30), (3, 'bob', 'created', 5, 20),
          (3, 'bob', 'paid', 6, 20), (3, 'bob', 'shipped', 7, 20), (4, 'cy', 'created', 3, 5),
          (6, 'ann', 'created', 2, 12);
        CREATE DYNAMIC TABLE {latest} AS
          SELECT order_id, max_by(status, ts) AS status, min_by(status, ts) AS first_status,
                 max(ts) AS ts, any_value(customer) AS customer,
                 first(customer, true) FILTER (WHERE ts > 1) AS customer_after_1
          FROM {src} GROUP BY order_id;
        CREATE DYNAMIC TABLE {per_customer} AS
          SELECT customer, mode(status) AS usual, percentile_approx(amount, 0.5) AS median,
                 max_by(order_id, amount) FILTER (WHERE status = 'created') AS biggest
          FROM {src} GROUP BY customer
        """
    )
    lines = lh.sql(f"EXPLAIN DYNAMIC TABLE {latest}").collect()
    assert any(
        "ANY_VALUE, FIRST, MAX_BY, MIN_BY recomputed for every touched group" in r.detail
        for r in lines
    ), [r.detail for r in lines]
    assert rows(lh.sql(f"SELECT order_id, status, first_status FROM {latest}")) == [
        (1, "paid", "created"),
        (2, "created", "created"),
        (3, "shipped", "created"),
        (4, "created", "created"),
        (6, "created", "created"),
    ]
    batches = [
        f"INSERT INTO {src} VALUES (2, 'ann', 'paid', 4, 30), (5, 'dee', 'created', 9, 8)",
        f"DELETE FROM {src} WHERE order_id = 3 AND ts = 5",  # paid is the first now
        f"UPDATE {src} SET customer = 'bob' WHERE order_id = 1",  # moves to bob
        f"DELETE FROM {src} WHERE customer = 'cy'",  # a customer's last order
    ]
    for batch in batches:
        lh.sql(batch)
        for dt in (latest, per_customer):
            assert _refresh(lh, dt)[0] == "INCREMENTAL", (dt, batch)
            assert_oracle(lh, dt)
        if batch.startswith("INSERT"):  # orders 1, 3, 4 and 6 kept theirs
            assert _stats(lh, latest)["agg0.recomputed_groups"] == "2"
    assert rows(
        lh.sql(f"SELECT order_id, status, first_status, customer, customer_after_1 FROM {latest}")
    ) == [
        (1, "paid", "created", "bob", "bob"),
        (2, "paid", "created", "ann", "ann"),
        (3, "shipped", "paid", "bob", "bob"),
        (5, "created", "created", "dee", "dee"),
        (6, "created", "created", "ann", "ann"),
    ]
    assert rows(lh.sql(f"SELECT customer, usual, median, biggest FROM {per_customer}")) == [
        ("ann", "created", 30, 2),
        ("bob", "paid", 10, 1),
        ("dee", "created", 8, 5),
    ]


def _join_over_an_aggregate(
    lh: Lakehouse, unique: Callable[[str], str], monkeypatch: pytest.MonkeyPatch, join: str
) -> tuple[str, str]:
    """(dynamic table, small source): 5,000 rows of ``big`` joined with a count per key
    of ``small``, AUTO, with the size thresholds lowered to this data."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    monkeypatch.setattr(planner, "FULL_MIN_ROWS", 1_000)
    big, small, dt = unique("big"), unique("small"), unique("over_agg")
    lh.sql(
        f"""
        CREATE TABLE {big} AS SELECT id AS k, id / 100 AS v FROM range(5000);
        CREATE TABLE {small} (k BIGINT, tag STRING);
        INSERT INTO {small} VALUES (1, 'a');
        CREATE DYNAMIC TABLE {dt} REFRESH_MODE = AUTO AS SELECT b.k, b.v, a.n FROM {big} b
          {join} (SELECT k, COUNT(*) AS n FROM {small} GROUP BY k) a ON a.k = b.k
        """
    )
    return dt, small


def test_auto_weighs_a_join_over_an_aggregate_before_writing_its_state(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """A join above an aggregate is weighed before anything is written, the aggregate's
    state standing in for its change. Recomputing builds new state; the next
    incremental refresh starts from it and is exact."""
    dt, small = _join_over_an_aggregate(lh, unique, monkeypatch, "JOIN")
    # the aggregate's delta meets big unpruned: as much reading as recomputing
    lh.sql(f"INSERT INTO {small} VALUES (3500, 'b'), (1, 'c')")
    assert _refresh(lh, dt)[0] == "FULL"
    assert _stats(lh, dt)["full_reason"] == "DELTA_READS_TOO_MUCH"
    assert_oracle(lh, dt)
    monkeypatch.setattr(planner, "FULL_MIN_ROWS", 10**12)  # never recompute
    lh.sql(f"INSERT INTO {small} VALUES (3500, 'd'), (7, 'e')")
    assert _refresh(lh, dt)[0] == "INCREMENTAL"
    assert_oracle(lh, dt)
    assert lh.sql(f"SELECT n FROM {dt} WHERE k = 3500").collect() == [(2,)]


def test_auto_weighs_an_outer_join_over_an_aggregate(lh: Lakehouse, unique, monkeypatch) -> None:
    """The stand-ins for an aggregate's state also type an outer join's NULL-padded rows."""
    dt, small = _join_over_an_aggregate(lh, unique, monkeypatch, "LEFT JOIN")
    lh.sql(f"INSERT INTO {small} VALUES (3500, 'b'), (9999, 'c')")
    assert _refresh(lh, dt)[0] in ("INCREMENTAL", "FULL")
    assert "estimate.delta_read_rows" in _stats(lh, dt)
    assert_oracle(lh, dt)


def test_auto_recomputes_a_leaderboard_from_the_aggregate_below_it(lh: Lakehouse, unique) -> None:
    """A rank over all of an aggregate's rows: any change re-ranks every row, so AUTO
    recomputes it (FULL, WINDOW_OVER_ALL_ROWS) from the aggregate alone, never from the
    orders under it; REFRESH_MODE = INCREMENTAL keeps the window's delta rule."""
    orders, gmv, board, ruled = unique("o"), unique("gmv"), unique("board"), unique("ruled")
    rank = "SELECT cat, total, RANK() OVER (ORDER BY total DESC) AS rk FROM {gmv}"
    lh.sql(
        f"""
        CREATE TABLE {orders} AS SELECT id, id % 5 AS cat, id % 7 AS amount FROM range(2000);
        CREATE DYNAMIC TABLE {gmv} AS SELECT cat, SUM(amount) AS total FROM {orders} GROUP BY cat;
        CREATE DYNAMIC TABLE {board} AS {rank.format(gmv=gmv)};
        CREATE DYNAMIC TABLE {ruled} REFRESH_MODE = INCREMENTAL AS {rank.format(gmv=gmv)}
        """
    )
    explained = dict((r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {board}").collect())
    assert explained["decision"] == "FULL"
    assert explained["reason"].startswith("WINDOW_OVER_ALL_ROWS")
    assert "delta sql" not in explained
    described = {r[0]: r[1] for r in lh.sql(f"DESCRIBE DYNAMIC TABLE {ruled}").collect()}
    assert described["Effective refresh mode"] == "INCREMENTAL"

    lh.sql(f"INSERT INTO {orders} VALUES (2000, 3, 500)")  # category 3 takes the lead
    assert _refresh(lh, gmv)[0] == "INCREMENTAL"
    assert _refresh(lh, board)[0] == "FULL"
    stats = _stats(lh, board)
    assert stats["full_reason"] == "WINDOW_OVER_ALL_ROWS"
    assert int(stats["input_rows"]) <= 5  # the aggregate's 5 rows, not the 2001 orders
    assert _refresh(lh, ruled)[0] == "INCREMENTAL"
    for dt in (board, ruled):
        assert lh.sql(f"SELECT cat FROM {dt} WHERE rk = 1").collect() == [(3,)]
        assert_oracle(lh, dt)
    # nothing changed below: no recompute
    assert _refresh(lh, board)[0] == "NO_DATA"


def test_a_table_partitioned_by_day_is_corrected_one_day_at_a_time(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """PARTITIONED BY takes Iceberg transforms; the MERGE of a correction then reads
    only the partition of its day (the timestamp range is pushed down)."""
    monkeypatch.setattr(apply, "SINGLE_JOB_MAX_ROWS", 0)  # as if the table were large
    monkeypatch.setattr(apply, "REWRITE_MAX_ROWS", 0)
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (id BIGINT, ts TIMESTAMP, v INT);
        INSERT INTO {src} SELECT id, timestamp_seconds(1767225600 + (id % 5) * 86400 + id),
          CAST(id % 3 AS INT) FROM range(5000);
        CREATE DYNAMIC TABLE {dt} PARTITIONED BY (days(ts)) AS SELECT id, ts, v FROM {src}
        """
    )
    assert lh.sql(f"SELECT count(*) FROM {lh.qualify(dt).sql()}.partitions").first()[0] == 5
    lh.sql(f"UPDATE {src} SET v = 9 WHERE id = 7")  # one row of the third day
    assert _refresh(lh, dt) == ("INCREMENTAL", 1, 1)
    # the source's change and the day's 1000 rows (8,004 rows here; 16,004 when the
    # MERGE compares every day)
    assert int(_stats(lh, dt)["input_rows"]) < 12_000
    assert_oracle(lh, dt)


def test_corrections_overwrite_the_partitions_they_fall_in(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """A table partitioned by a column of its rows takes a delta that removes rows by
    rewriting the partitions holding them (one read and one write of those partitions,
    where a MERGE reads them three times), whatever the transform: hours, days, months
    or years of a timestamp or a date, or a date's or an integer's own value. Rows move
    between partitions, one of two equal rows goes, rows of the NULL partition go, new
    rows land outside the rewritten partitions."""
    monkeypatch.setattr(apply, "SINGLE_JOB_MAX_ROWS", 0)  # as if the table were large
    monkeypatch.setattr(apply, "REWRITE_MAX_ROWS", 0)
    overwrites: list[str] = []
    overwrite = apply._overwrite

    def counted(spark, table_sql, columns, view, condition, *rest) -> None:  # type: ignore[no-untyped-def]
        overwrites.append(condition)
        overwrite(spark, table_sql, columns, view, condition, *rest)

    monkeypatch.setattr(apply, "_overwrite", counted)
    src = unique("src")
    lh.sql(
        f"""
        CREATE TABLE {src} (id BIGINT, ts TIMESTAMP, d DATE, g INT, v INT, tag STRING);
        INSERT INTO {src} SELECT id,
          IF(id % 50 = 0, NULL, timestamp_seconds(1767225600 + (id % 5) * 86400 * 40 + id * 7)),
          IF(id % 60 = 0, NULL, date_add(DATE'2026-01-01', CAST(id % 7 AS INT) * 45)),
          IF(id % 70 = 0, NULL, CAST(id % 4 AS INT)), CAST(id % 3 AS INT), 'a' FROM range(600);
        INSERT INTO {src} SELECT id, ts, d, g, v, 'b' FROM {src} WHERE id < 20
        """
    )
    layouts = ("hours(ts)", "days(ts)", "months(ts)", "years(ts)", "days(d)", "months(d)")
    dts = {layout: unique("dt") for layout in (*layouts, "d", "g")}
    for layout, dt in dts.items():
        lh.sql(
            f"CREATE DYNAMIC TABLE {dt} PARTITIONED BY ({layout}) AS "
            f"SELECT id, ts, d, g, v FROM {src} WHERE v >= 0"
        )
    lh.sql(
        f"""
        UPDATE {src} SET v = v + 1, ts = ts + INTERVAL 1 DAY, d = d + 1, g = g + 1
          WHERE id IN (3, 7, 400);
        DELETE FROM {src} WHERE (id = 11 AND tag = 'b') OR id IN (50, 60, 70, 120);
        INSERT INTO {src} VALUES (1000, TIMESTAMP'2030-01-01 00:00:00', DATE'2030-01-01', 9, 1, 'a')
        """
    )
    monkeypatch.setattr(explain, "SINGLE_JOB_MAX_ROWS", 0)
    monkeypatch.setattr(explain, "REWRITE_MAX_ROWS", 0)
    explained = dict(
        (r.item, r.detail) for r in lh.sql(f"EXPLAIN DYNAMIC TABLE {dts['days(ts)']}").collect()
    )
    assert "partitions holding the leaving values are overwritten" in explained["apply"]
    for layout, dt in dts.items():
        before = len(overwrites)
        assert _refresh(lh, dt) == ("INCREMENTAL", 6, 10), layout
        assert len(overwrites) == before + 1, layout
        assert_oracle(lh, dt)
    # a partition holding more data files than values leaving it is MERGEd, as
    # before: an overwrite would rewrite every file of it
    by_year = dts["years(ts)"]
    for i in range(3):
        lh.sql(
            f"INSERT INTO {src} VALUES ({2000 + i}, TIMESTAMP'2026-02-02 00:00:00', NULL, 1, 1, 'a')"
        )
        assert _refresh(lh, by_year)[0] == "INCREMENTAL"
    lh.sql(f"DELETE FROM {src} WHERE id = 2001")
    before = len(overwrites)
    assert _refresh(lh, by_year) == ("INCREMENTAL", 0, 1)
    assert len(overwrites) == before
    assert_oracle(lh, by_year)


def test_state_written_by_an_earlier_version_with_staging_still_refreshes(
    lh: Lakehouse, unique
) -> None:
    """State tables built before state commits went direct have WAP on, so their writes
    are staged: the refresh publishes them and records the staged snapshot."""
    from dyntables.catalog.definition import RefreshState

    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('b', 2);
        CREATE DYNAMIC TABLE {dt} AS SELECT k, SUM(v) AS s, COUNT(*) AS n FROM {src} GROUP BY k
        """
    )
    state = RefreshState.from_properties(load_table(lh.spark, lh.qualify(dt)).properties())
    assert state is not None and len(state.state_tables) == 1
    (info,) = state.state_tables.values()
    lh.sql(f"ALTER TABLE {info['table']} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    for batch in ("('a', 5), ('c', 1)", "('a', 7), ('b', 1)"):
        lh.sql(f"INSERT INTO {src} VALUES {batch}")
        assert _refresh(lh, dt)[0] == "INCREMENTAL"
        assert_oracle(lh, dt)


def test_a_source_named_in_capitals_is_maintained_incrementally(lh: Lakehouse, unique) -> None:
    """sqlglot lower-cases unquoted names but the Iceberg catalog keeps a table's case:
    the compiler once looked for ``orders`` when the query read ``Orders``, found no such
    source, and refreshed every time FULL with UNKNOWN_SOURCE."""
    src, dt = unique("Orders"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (Kind STRING, Qty INT);
        INSERT INTO {src} VALUES ('a', 1), ('b', 2);
        CREATE DYNAMIC TABLE {dt} AS SELECT o.KIND AS kind, SUM(o.qty) AS qty FROM {src} o GROUP BY o.Kind
        """
    )
    lh.sql(f"INSERT INTO {src} VALUES ('a', 5); DELETE FROM {src} WHERE Kind = 'b'")
    assert _refresh(lh, dt) == ("INCREMENTAL", 1, 2)
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [("a", 6)]
    assert_oracle(lh, dt)


def test_a_function_over_tied_peers_reads_the_partitions_the_change_touches(
    lh: Lakehouse, unique, monkeypatch
) -> None:
    """The last value so far per id runs in two steps, a window over a window: the
    large input is still read only within the change's range of ids."""
    monkeypatch.setattr(rules, "PRUNE_MIN_ROWS", 1_000)
    log, dt = unique("log"), unique("last_so_far")
    lh.sql(f"CREATE TABLE {log} (id BIGINT, ts BIGINT, v STRING)")
    for i in range(5):  # five files with disjoint id ranges, two rows of each id
        lh.sql(
            f"INSERT INTO {log} SELECT id DIV 2, id, CAST(id AS STRING) "
            f"FROM range({i * 1000}, {(i + 1) * 1000})"
        )
    lh.sql(
        f"CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS SELECT id, ts, "
        f"last_value(v) OVER (PARTITION BY id ORDER BY ts) AS last_v FROM {log}"
    )
    lh.sql(f"INSERT INTO {log} VALUES (2300, 9000, 'x'), (2400, 4799, 'y')")
    assert _refresh(lh, dt) == ("INCREMENTAL", 2, 0)
    # the table's own 5,000 rows (a small table is rewritten with its delta) and one file
    # of five, old and new; through the first window unpruned, the log is read whole twice
    assert int(_stats(lh, dt)["input_rows"]) < 5_000 + 2 * 1_100
    assert_oracle(lh, dt)
