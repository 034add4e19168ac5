"""A HAVING with a subquery in it, as the WHERE of a query over the grouped rows, pure
(no Spark); the scenarios subqueries-in-having*.scn check the answers against Spark."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dyntables.plan import having
from dyntables.plan.build import build_plan
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import Aggregate, Filter, Join, walk_post_order
from tests.plan.test_query import qualify
from tests.plan.test_truth_subqueries import SCHEMA


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT s, SUM(n) AS x FROM t0 GROUP BY s HAVING s IN (SELECT s FROM t1)",
        "SELECT s, SUM(n) AS x FROM t0 GROUP BY s HAVING s NOT IN (SELECT s FROM t1) AND COUNT(*) > 1",
        "SELECT s, SUM(n) AS x FROM t0 GROUP BY s HAVING EXISTS (SELECT 1 FROM t1 WHERE t1.s = t0.s)",
        "SELECT s FROM t0 GROUP BY s HAVING NOT EXISTS (SELECT 1 FROM t1 WHERE t1.s = t0.s)",
        "SELECT s, SUM(n) AS x FROM t0 GROUP BY s HAVING SUM(n) > (SELECT COUNT(*) FROM t1 WHERE t1.s = t0.s)",
        "SELECT s, SUM(n) AS x FROM t0 GROUP BY s HAVING SUM(n) IN (SELECT k FROM t1)",
        # the subquery reads the outer table under the same name
        "SELECT s, SUM(n) AS x FROM t0 GROUP BY s HAVING s IN (SELECT s FROM t0 WHERE n > 3)",
        "SELECT DISTINCT SUM(n) AS x FROM t0 GROUP BY s HAVING s IN (SELECT s FROM t1) OR MAX(n) > 3",
        "SELECT SUM(n) AS x FROM t0 HAVING SUM(n) IN (SELECT k FROM t1)",
        "SELECT s AS r, SUM(n) AS x FROM t0 GROUP BY s HAVING r IN (SELECT s FROM t1) AND x > 0",
        "SELECT upper(s) AS u FROM t0 GROUP BY upper(s) HAVING upper(s) IN (SELECT s FROM t1)",
        "SELECT s, (SELECT COUNT(*) FROM t1) AS v FROM t0 GROUP BY s HAVING s IN (SELECT s FROM t1)",
    ],
)
def test_maintained_over_the_groups(sql: str) -> None:
    root = build_plan(sql, SCHEMA, qualify).root
    nodes = list(walk_post_order(root))
    aggregate = next(n for n in nodes if isinstance(n, Aggregate))
    above = [
        n for n in nodes if isinstance(n, (Join, Filter)) and aggregate in list(walk_post_order(n))
    ]
    assert above, "the subquery filters the groups, above their aggregate"


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        ("SELECT s, SUM(n) AS x FROM t0 GROUP BY ALL HAVING s IN (SELECT s FROM t1)", ["s"]),
        (
            "SELECT 7 AS tag, k + 1 AS k1, COUNT(*) AS c FROM t0 GROUP BY ALL "
            "HAVING MAX(s) IN (SELECT s FROM t1 WHERE t1.k > 0)",
            ["7", "k + 1"],
        ),
        ("SELECT SUM(n) AS x FROM t0 GROUP BY ALL HAVING SUM(n) IN (SELECT k FROM t1)", []),
    ],
)
def test_group_by_all_is_spelled_out_before_its_having_reads_more(
    sql: str, keys: list[str]
) -> None:
    """The columns the HAVING reads are hidden columns of the groups, not more keys:
    GROUP BY ALL is every item without an aggregate (none: one global group)."""
    root = build_plan(sql, SCHEMA, qualify).root
    aggregate = next(n for n in walk_post_order(root) if isinstance(n, Aggregate))
    assert len(aggregate.keys) == len(keys)
    select = sqlglot.parse_one(sql, read="spark")
    assert isinstance(select, exp.Select)
    rewritten = having.as_where(select)
    assert rewritten is not None
    inner = rewritten.args["from_"].this.this
    group = inner.args.get("group")
    written = [e.sql("spark").replace("t0.", "") for e in group.expressions] if group else []
    assert written == keys


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        (
            "SELECT s, RANK() OVER (ORDER BY SUM(n)) AS r FROM t0 GROUP BY s HAVING s IN (SELECT s FROM t1)",
            "SUBQUERY_EXPRESSION",
        ),
        (
            "SELECT s, COUNT(*) AS c FROM t0 GROUP BY ROLLUP(s) HAVING grouping(s) = 0 AND s IN (SELECT s FROM t1)",
            "SUBQUERY_EXPRESSION",
        ),
    ],
)
def test_refused_where_the_where_would_differ(sql: str, code: str) -> None:
    with pytest.raises(NotIncremental) as info:
        build_plan(sql, SCHEMA, qualify)
    assert info.value.code == code


def test_what_the_condition_reads_becomes_hidden_columns() -> None:
    """Aggregates, grouped columns and a correlation's outer column are read from the
    derived table of the groups; the subquery's own columns stay its own."""
    select = sqlglot.parse_one(
        "SELECT t0.s AS s, SUM(t0.n) AS x FROM t0 AS t0 GROUP BY t0.s "
        "HAVING SUM(t0.n) > 1 AND EXISTS (SELECT 1 FROM t1 AS t1 WHERE t1.s = t0.s)",
        dialect="spark",
    )
    assert isinstance(select, exp.Select)
    rewritten = having.as_where(select)
    assert rewritten is not None
    assert rewritten.sql("spark") == (
        "SELECT __dyntables_having.__dyntables_c0 AS s, __dyntables_having.__dyntables_c1 AS x "
        "FROM (SELECT t0.s AS __dyntables_c0, SUM(t0.n) AS __dyntables_c1, "
        "SUM(t0.n) AS __dyntables_h0, t0.s AS __dyntables_h1 FROM t0 AS t0 GROUP BY t0.s) "
        "AS __dyntables_having WHERE __dyntables_having.__dyntables_h0 > 1 AND EXISTS("
        "SELECT 1 FROM t1 AS t1 WHERE t1.s = __dyntables_having.__dyntables_h1)"
    )


def test_an_uncorrelated_scalar_subquery_is_left_where_it_is() -> None:
    select = sqlglot.parse_one(
        "SELECT t0.s AS s FROM t0 AS t0 GROUP BY t0.s HAVING SUM(t0.n) > (SELECT COUNT(*) FROM t1 AS t1)",
        dialect="spark",
    )
    assert isinstance(select, exp.Select)
    assert having.as_where(select) is None


def test_a_select_without_group_by_stays_one_group() -> None:
    """A HAVING makes it a global aggregate even with no aggregate in it (helper-29: the
    table held a row per source row); the query over the groups keeps a COUNT(*)."""
    select = sqlglot.parse_one(
        "SELECT 'x' AS c FROM t0 AS t0 HAVING EXISTS (SELECT 1 FROM t1 AS t1)", dialect="spark"
    )
    assert isinstance(select, exp.Select)
    rewritten = having.as_where(select)
    assert rewritten is not None
    assert "COUNT(*) AS __dyntables_h0 FROM t0 AS t0)" in rewritten.sql("spark")
