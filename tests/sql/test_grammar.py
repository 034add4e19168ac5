"""The dispatcher is pure: statements in, frozen data out, no Spark."""

import pytest

from dyntables.errors import SqlSyntaxError
from dyntables.sql import TableName, parse_statement
from dyntables.sql.statements import (
    AlterDynamicTable,
    CreateDynamicTable,
    DescribeDynamicTable,
    DropDynamicTable,
    ExplainDynamicTable,
    RefreshDynamicTable,
    SetTableProperties,
    ShowDynamicTables,
    ShowRefreshHistory,
    SparkStatement,
    UndropTable,
)


@pytest.mark.parametrize(
    "text, interval, vcluster",
    [
        # the seeds' own spellings
        (
            "CREATE DYNAMIC TABLE event_type_count REFRESH interval 1 minute vcluster default as "
            "SELECT event_type, COUNT(*) AS events_count FROM t GROUP BY event_type",
            60,
            "DEFAULT",
        ),
        (
            "CREATE DYNAMIC TABLE dws_category_sales REFRESH INTERVAL 10 MINUTE VCLUSTER default AS SELECT 1",
            600,
            "DEFAULT",
        ),
        ("CREATE dynamic TABLE IF NOT EXISTS event_gettime AS SELECT 1", None, "DEFAULT"),
        ("create dynamic table x refresh interval 1 second vcluster etl as select 1", 1, "ETL"),
    ],
)
def test_create_dynamic_table_seed_spellings(
    text: str, interval: int | None, vcluster: str
) -> None:
    stmt = parse_statement(text)
    assert isinstance(stmt, CreateDynamicTable)
    assert stmt.interval_seconds == interval
    assert stmt.vcluster == vcluster
    assert stmt.query.upper().startswith("SELECT")


def test_create_with_every_option() -> None:
    stmt = parse_statement(
        "CREATE OR REPLACE DYNAMIC TABLE s.t (a COMMENT 'first', b) PARTITIONED BY (a) COMMENT 'hi' "
        "REFRESH INTERVAL 2 HOUR REFRESH_MODE = incremental VCLUSTER default PROPERTIES ('k'='v') "
        "AS SELECT x AS a, y AS b FROM src"
    )
    assert isinstance(stmt, CreateDynamicTable)
    assert stmt.or_replace and not stmt.if_not_exists
    assert stmt.name == TableName(("s", "t"))
    assert [c.name for c in stmt.columns] == ["a", "b"] and stmt.columns[0].comment == "first"
    assert stmt.partitioned_by == ("a",)
    assert stmt.comment == "hi"
    assert stmt.interval_seconds == 7200
    assert stmt.refresh_mode == "INCREMENTAL"
    assert stmt.properties == (("k", "v"),)
    assert stmt.query == "SELECT x AS a, y AS b FROM src"


def test_partitioned_by_takes_columns_and_iceberg_transforms() -> None:
    stmt = parse_statement(
        "CREATE DYNAMIC TABLE t PARTITIONED BY (DAYS(ts), bucket(16, id), truncate(s, 4), k) "
        "AS SELECT * FROM src"
    )
    assert isinstance(stmt, CreateDynamicTable)
    assert stmt.partitioned_by == ("days(`ts`)", "bucket(16, `id`)", "truncate(`s`, 4)", "k")
    with pytest.raises(SqlSyntaxError, match="unknown partition transform upper"):
        parse_statement("CREATE DYNAMIC TABLE t PARTITIONED BY (upper(s)) AS SELECT * FROM src")


def test_create_query_keeps_semicolon_free_raw_text() -> None:
    stmt = parse_statement("CREATE DYNAMIC TABLE t AS\n  SELECT 'a' AS x -- comment\n  FROM s")
    assert isinstance(stmt, CreateDynamicTable)
    assert stmt.query.startswith("SELECT 'a' AS x")
    assert stmt.query.endswith("FROM s")


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "CREATE DYNAMIC TABLE t REFRESH INTERVAL 5 FORTNIGHT AS SELECT 1",
            "unknown interval unit",
        ),
        ("CREATE DYNAMIC TABLE t REFRESH_MODE = SOMETIMES AS SELECT 1", "unknown REFRESH_MODE"),
        ("CREATE DYNAMIC TABLE t SELECT 1", "unknown dynamic table option"),
        ("CREATE DYNAMIC TABLE t AS", "expected a SELECT"),
        ("REFRESH DYNAMIC TABLE", "expected a name"),
        ("SHOW DYNAMIC TABLE REFRESH HISTORY LIMIT x", "whole number"),
        ("ALTER DYNAMIC TABLE t FLY", "expected SUSPEND"),
    ],
)
def test_bad_statements_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(SqlSyntaxError, match=message):
        parse_statement(text)


def test_other_dynamic_table_statements() -> None:
    assert parse_statement("REFRESH DYNAMIC TABLE a.b") == RefreshDynamicTable(
        text="REFRESH DYNAMIC TABLE a.b", name=TableName(("a", "b"))
    )
    assert parse_statement("refresh dynamic table full full").full  # a table named full
    assert parse_statement("ALTER DYNAMIC TABLE a.b REFRESH") == RefreshDynamicTable(
        text="ALTER DYNAMIC TABLE a.b REFRESH", name=TableName(("a", "b"))
    )
    show = parse_statement("SHOW DYNAMIC TABLES LIKE 'dws%'")
    assert isinstance(show, ShowDynamicTables) and show.like == "dws%"
    show = parse_statement("SHOW DYNAMIC TABLES IN lakehouse.dws LIKE 'a%'")
    assert isinstance(show, ShowDynamicTables) and show.like == "a%"
    assert show.namespace == TableName(("lakehouse", "dws"))
    hist = parse_statement(
        "SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = 'my_dy' AND state <> 'x' LIMIT 10"
    )
    assert isinstance(hist, ShowRefreshHistory)
    assert hist.where == "name = 'my_dy' AND state <> 'x'" and hist.limit == 10
    desc = parse_statement("DESC DYNAMIC TABLE t EXTENDED")
    assert isinstance(desc, DescribeDynamicTable) and desc.extended
    assert isinstance(parse_statement("DESCRIBE DYNAMIC TABLE t"), DescribeDynamicTable)
    drop = parse_statement("DROP DYNAMIC TABLE IF EXISTS t")
    assert isinstance(drop, DropDynamicTable) and drop.if_exists
    assert isinstance(parse_statement("UNDROP TABLE t"), UndropTable)
    alter = parse_statement("ALTER DYNAMIC TABLE t SET REFRESH INTERVAL 30 MINUTE")
    assert isinstance(alter, AlterDynamicTable) and alter.interval_seconds == 1800
    assert parse_statement("ALTER DYNAMIC TABLE t SUSPEND").action == "SUSPEND"  # type: ignore[attr-defined]
    props = parse_statement("ALTER TABLE dws SET PROPERTIES ('data_retention_days'='7')")
    assert isinstance(props, SetTableProperties) and props.properties == (
        ("data_retention_days", "7"),
    )
    assert isinstance(parse_statement("EXPLAIN DYNAMIC TABLE t"), ExplainDynamicTable)
    assert isinstance(parse_statement("EXPLAIN REFRESH t"), ExplainDynamicTable)


@pytest.mark.parametrize(
    "text, verb, target",
    [
        ("SELECT * FROM t", None, None),
        ("REFRESH TABLE t", None, None),  # Spark's cache refresh, not ours
        ("EXPLAIN SELECT 1", None, None),
        ("SHOW TABLES", None, None),
        ("INSERT INTO db.t VALUES (1)", "INSERT", ("db", "t")),
        ("insert overwrite table t select 1", "INSERT", ("t",)),
        ("UPDATE t SET a = 1", "UPDATE", ("t",)),
        ("DELETE FROM t WHERE a = 1", "DELETE", ("t",)),
        ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE", "MERGE", ("t",)),
        ("TRUNCATE TABLE t", "TRUNCATE", ("t",)),
        ("DROP TABLE IF EXISTS t", "DROP", ("t",)),
        ("ALTER TABLE t ADD COLUMN c INT", "ALTER", ("t",)),
        # found by helper-26: each wrote a dynamic table past the guard
        ("CREATE OR REPLACE TABLE t AS SELECT 1 AS x", "REPLACE", ("t",)),
        ("REPLACE TABLE t USING iceberg AS SELECT 1 AS x", "REPLACE", ("t",)),
        ("WITH x AS (SELECT 1 AS a) INSERT INTO t SELECT * FROM x", "INSERT", ("t",)),
        ("FROM (SELECT 1 AS a) x INSERT INTO t SELECT *", "INSERT", ("t",)),
        ("WITH x AS (SELECT 1 AS a) SELECT * FROM x", None, None),
        ("CREATE TABLE t (a INT)", None, None),
    ],
)
def test_pass_through_statements_know_what_they_write(
    text: str, verb: str | None, target: tuple | None
) -> None:
    stmt = parse_statement(text)
    assert isinstance(stmt, SparkStatement)
    assert stmt.text == text
    assert stmt.verb == verb
    assert (stmt.writes.parts if stmt.writes else None) == target


def test_every_insert_of_a_from_first_statement_is_known() -> None:
    stmt = parse_statement("FROM s INSERT INTO a SELECT x INSERT OVERWRITE TABLE b SELECT y")
    assert isinstance(stmt, SparkStatement) and stmt.writes is not None
    assert [stmt.writes.parts, *(t.parts for t in stmt.also_writes)] == [("a",), ("b",)]
