"""The operator tree's scans, pure (no Spark): a scan reads only the columns the query
uses, and a query that must read a MAP column has no delta rule."""

from __future__ import annotations

import pytest

from dyntables.plan.build import NotIncremental, build_plan
from dyntables.plan.ops import scans
from dyntables.sql.tokens import TableName
from tests.plan.test_query import qualify

T0 = TableName(("lakehouse", "public", "t0"))
T1 = TableName(("lakehouse", "public", "t1"))
SCHEMA = {
    T0: [("k", "int"), ("n", "int"), ("m", "map<string,int>"), ("z", "int")],
    T1: [("k", "int"), ("s", "string")],
}


def scanned(sql: str) -> list[tuple[str, tuple[str, ...]]]:
    plan = build_plan(sql, SCHEMA, qualify)
    return [(s.table.parts[-1], s.source_columns) for s in scans(plan.root)]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT l0.k, l0.n FROM t0 AS l0 WHERE l0.n > 5", [("t0", ("k", "n"))]),
        ("SELECT t0.k, t1.s FROM t0 JOIN t1 ON t0.k = t1.k", [("t0", ("k",)), ("t1", ("k", "s"))]),
        ("SELECT COUNT(*) AS c FROM t0", [("t0", ("k",))]),  # one column still counts rows
        ("SELECT z FROM t0 UNION ALL SELECT k FROM t1", [("t0", ("z",)), ("t1", ("k",))]),
        ("SELECT k, SUM(n) AS s FROM t0 WHERE z > 0 GROUP BY k", [("t0", ("k", "n", "z"))]),
        (
            "SELECT k FROM t0 WHERE EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k)",
            [("t0", ("k",)), ("t1", ("k",))],
        ),
        (
            "SELECT k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY n) AS r FROM t0",
            [("t0", ("k", "n"))],
        ),
        # a CTE named like its source, and its body's table read once
        ("WITH t0 AS (SELECT k, n FROM t0 WHERE k > 1) SELECT k FROM t0", [("t0", ("k", "n"))]),
        ("SELECT public.t0.k FROM public.t0", [("t0", ("k",))]),
    ],
)
def test_scans_read_only_the_columns_the_query_uses(
    sql: str, expected: list[tuple[str, tuple[str, ...]]]
) -> None:
    assert scanned(sql) == expected


def test_reading_a_map_column_has_no_delta_rule() -> None:
    with pytest.raises(NotIncremental) as err:
        build_plan("SELECT k, m['a'] AS a FROM t0", SCHEMA, qualify)
    assert err.value.code == "MAP_COLUMN"


def test_nested_ctes_of_one_name_build() -> None:
    plan = build_plan(
        "SELECT a.k AS ak, b.k AS bk FROM (WITH w AS (SELECT k FROM t0) SELECT k FROM w) AS a "
        "FULL JOIN (WITH w AS (SELECT k FROM t1) SELECT k FROM w) AS b ON a.k = b.k",
        SCHEMA,
        qualify,
    )
    assert [s.table.parts[-1] for s in scans(plan.root)] == ["t0", "t1"]
