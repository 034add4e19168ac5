"""ORDER BY ... LIMIT as a ranking, pure (no Spark): which queries are rewritten, into
what, and which stay FULL. That the ranking keeps the rows Spark's LIMIT keeps is the
oracle's to say (tests/ivm/test_rules_oracle.py, the differential suite's top_n shape)."""

from __future__ import annotations

import pytest
import sqlglot

from dyntables.plan import top_n
from dyntables.plan.build import build_plan
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import Aggregate, Filter, Window, walk_post_order
from dyntables.sql.tokens import TableName
from tests.plan.test_query import qualify

T0 = TableName(("lakehouse", "public", "t0"))
T1 = TableName(("lakehouse", "public", "t1"))
SCHEMA = {T0: [("k", "int"), ("n", "int"), ("s", "string")], T1: [("k", "int"), ("c", "string")]}


def ops(sql: str) -> list[type]:
    return [type(n) for n in walk_post_order(build_plan(sql, SCHEMA, qualify).root)]


@pytest.mark.parametrize(
    "sql",
    [
        # the top groups, by a column, a position, an aggregate not selected
        "SELECT c, SUM(n) AS total FROM t0 JOIN t1 ON t0.k = t1.k GROUP BY c "
        "ORDER BY total DESC, c LIMIT 3",
        "SELECT k, COUNT(*) AS n FROM t0 GROUP BY k ORDER BY 2 DESC, 1 LIMIT 2 OFFSET 1",
        "SELECT k FROM t0 GROUP BY k ORDER BY SUM(n) + 1 LIMIT 2",
        # rows, by a column not selected; a union; DISTINCT; a CTE; a derived table
        "SELECT k FROM t0 ORDER BY t0.n DESC NULLS FIRST, k LIMIT 5",
        "SELECT k FROM t0 UNION ALL SELECT k FROM t1 ORDER BY k LIMIT 2",
        "SELECT DISTINCT s FROM t0 ORDER BY s LIMIT 2",
        # a DISTINCT ordered by a selected column as written (with its table), not by name
        "SELECT DISTINCT t1.c, t0.k FROM t0 JOIN t1 ON t0.k = t1.k ORDER BY t1.c LIMIT 2",
        "SELECT DISTINCT k, s FROM t0 ORDER BY t0.s DESC, t0.k LIMIT 2",
        "WITH g AS (SELECT k, MAX(n) AS m FROM t0 GROUP BY k) SELECT k, m FROM g ORDER BY m, k LIMIT 1",
        "SELECT x.k FROM (SELECT k FROM t0 ORDER BY n LIMIT 3) AS x JOIN t1 ON x.k = t1.k",
        "SELECT k FROM t0 ORDER BY k OFFSET 2",
    ],
)
def test_order_by_limit_is_a_ranking(sql: str) -> None:
    kinds = ops(sql)
    windows = [
        n for n in walk_post_order(build_plan(sql, SCHEMA, qualify).root) if isinstance(n, Window)
    ]
    assert len(windows) == 1 and not windows[0].partition_by
    assert Filter in kinds


def test_the_ranking_keeps_the_query_columns_and_drops_its_own() -> None:
    plan = build_plan(
        "SELECT k, COUNT(*) AS n FROM t0 GROUP BY k ORDER BY SUM(n) DESC LIMIT 2", SCHEMA, qualify
    )
    assert plan.output_names == ("k", "n")
    assert len(plan.root.columns) == 2
    assert Aggregate in [type(n) for n in walk_post_order(plan.root)]


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT k FROM t0 LIMIT 2", "without ORDER BY"),
        ("SELECT DISTINCT k FROM t0 ORDER BY t0.n LIMIT 2", "DISTINCT"),
        ("SELECT k FROM t0 UNION SELECT k FROM t1 ORDER BY k + 1 LIMIT 2", "set operation"),
        # the order must not depend on which rows are read first in a subquery's LIMIT
        ("SELECT k FROM t0 WHERE k NOT IN (SELECT k FROM t1 ORDER BY k LIMIT 1)", "LIMIT"),
    ],
)
def test_limits_without_a_ranking_stay_full(sql: str, why: str) -> None:
    with pytest.raises(NotIncremental, match=why) as err:
        build_plan(sql, SCHEMA, qualify)
    assert err.value.code == "LIMIT"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT t0.k AS _top_rank, t0.n AS n FROM t0 ORDER BY n LIMIT 2",
        "SELECT t0.k AS _top_order0 FROM t0 ORDER BY t0.n DESC LIMIT 2",
        "SELECT t0.k AS _top_rank, t0.s AS _top_rank_1, t0.k + 1 AS _top_order0 "
        "FROM t0 ORDER BY t0.n, t0.s LIMIT 2",
    ],
)
def test_the_rankings_own_columns_are_named_apart_from_the_querys(sql: str) -> None:
    """A query column named like the rank or a hidden order column kept its name, and
    the rank's value or the order's replaced its own (helper-31)."""
    query = sqlglot.parse_one(sql, read="spark")
    ranked = top_n.as_ranked(query)
    inner = ranked.args["from_"].this.this  # SELECT <columns>, <hidden>, ROW_NUMBER() ...
    names = [e.alias_or_name for e in inner.expressions]
    assert len({n.lower() for n in names}) == len(names), names
    assert ranked.named_selects == query.named_selects
    own = query.named_selects
    rows = inner.args["from_"].this.this  # the query without ORDER BY, hidden items added
    for item in rows.expressions[: len(own)]:
        assert item.sql("spark") == query.expressions[own.index(item.alias_or_name)].sql("spark")


@pytest.mark.parametrize(
    ("sql", "hidden"),
    [
        # Spark reads k as the select list's column first: abs(t0.n), not abs(t0.k)
        ("SELECT t0.n AS k FROM t0 ORDER BY ABS(k) DESC LIMIT 2", "ABS((t0.n))"),
        ("SELECT t0.n AS k, t0.k AS n FROM t0 ORDER BY k + 0 LIMIT 2", "(t0.n) + 0"),
        (
            "SELECT t0.k AS k, SUM(t0.n) AS total FROM t0 GROUP BY t0.k ORDER BY ABS(total) LIMIT 2",
            "ABS((SUM(t0.n)))",
        ),
    ],
)
def test_an_order_expression_over_a_select_column_reads_its_value(sql: str, hidden: str) -> None:
    """It was FULL (LIMIT); the hidden order column computes it from the item's own
    expression, as Spark resolves the name."""
    ranked = top_n.as_ranked(sqlglot.parse_one(sql, read="spark"))
    rows = ranked.args["from_"].this.this.args["from_"].this.this
    assert rows.expressions[-1].unalias().sql("spark") == hidden


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT t0.k, ROW_NUMBER() OVER (PARTITION BY t0.s ORDER BY t0.n) AS r FROM t0 "
        "ORDER BY r + 0 LIMIT 2",
        "SELECT t0.k, explode(array(t0.n)) AS e FROM t0 ORDER BY e + 0 LIMIT 2",
    ],
)
def test_an_order_expression_over_a_window_or_generator_column_stays_full(sql: str) -> None:
    with pytest.raises(top_n.Unsupported, match="window, a generator"):
        top_n.as_ranked(sqlglot.parse_one(sql, read="spark"))
