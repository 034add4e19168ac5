"""EXISTS and IN (subquery) outside a WHERE's top-level conjuncts, pure (no Spark): each
is counted by a LEFT-joined aggregate where Spark's answer is a TRUE/FALSE flag, and
FULL where Spark's answer depends on its optimizer."""

from __future__ import annotations

import pytest
import sqlglot

from dyntables.plan import truth_subqueries
from dyntables.plan.build import build_plan
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import Aggregate, Join, walk_post_order
from dyntables.sql.tokens import TableName
from tests.plan.test_query import qualify

T0 = TableName(("lakehouse", "public", "t0"))
T1 = TableName(("lakehouse", "public", "t1"))
SCHEMA = {T0: [("k", "int"), ("n", "int"), ("s", "string")], T1: [("k", "int"), ("s", "string")]}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k FROM t0 WHERE k IN (SELECT k FROM t1) OR n > 5",
        "SELECT k, k IN (SELECT k FROM t1) AS f FROM t0",
        "SELECT k, (k, s) IN (SELECT k, s FROM t1) AND n > 1 AS f FROM t0",
        "SELECT k, CASE WHEN k IN (SELECT k FROM t1) THEN 'x' ELSE 'y' END AS f FROM t0",
        "SELECT k, IF(k IN (SELECT k FROM t1), 1, 0) AS f FROM t0",
        "SELECT k, EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k) AS f FROM t0",
        "SELECT k, NOT EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k) = TRUE AS f FROM t0",
        "SELECT k FROM t0 WHERE n > 5 OR EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k)",
        "SELECT s, SUM(CASE WHEN k IN (SELECT k FROM t1) THEN n END) AS x FROM t0 GROUP BY s",
        # in an aggregate's FILTER, read below the aggregate as its argument is
        "SELECT s, COUNT(*) FILTER (WHERE k IN (SELECT k FROM t1)) AS x FROM t0 GROUP BY s",
        "SELECT s, MAX(n) FILTER (WHERE k NOT IN (SELECT k FROM t1) OR n > 1) AS x FROM t0 "
        "GROUP BY s",
        "SELECT COUNT(DISTINCT s) FILTER (WHERE EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k)) "
        "AS x FROM t0",
        # an EXISTS the semi join cannot read whole, counted even as a conjunct
        "SELECT k FROM t0 WHERE EXISTS (SELECT 1 FROM t1 JOIN t0 AS b ON b.k = t1.k "
        "WHERE t1.k = t0.k)",
        "SELECT k FROM t0 WHERE EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k LIMIT 1)",
        # under NOT, Spark's null-aware flag
        "SELECT k, NOT (k IN (SELECT k FROM t1)) AS f FROM t0",
        "SELECT k, k NOT IN (SELECT k FROM t1) AS f FROM t0",
        "SELECT k FROM t0 WHERE NOT (k IN (SELECT k FROM t1) OR n > 1)",
        "SELECT k, IF(k NOT IN (SELECT k FROM t1), 1, 0) AS f FROM t0",
        "SELECT k FROM t0 WHERE (k, s) NOT IN (SELECT k, s FROM t1) OR n > 1",
        # the subquery's ORDER BY names its own column (helper-28)
        "SELECT k FROM t0 WHERE k IN (SELECT t1.k AS kk FROM t1 ORDER BY kk LIMIT 2) OR n > 1",
        # the subquery reads the outer query's table under the same name
        "SELECT k FROM t0 WHERE k IN (SELECT t0.n FROM t0 WHERE t0.n > 1) OR n = 0",
    ],
)
def test_truth_subqueries_are_counted_by_a_left_joined_aggregate(sql: str) -> None:
    root = build_plan(sql, SCHEMA, qualify).root
    joins = [n for n in walk_post_order(root) if isinstance(n, Join) and n.kind == "left"]
    assert joins, "a counted subquery is a LEFT join"
    assert all(isinstance(j.right, Aggregate) or _has_aggregate(j.right) for j in joins)


def _has_aggregate(node: object) -> bool:
    return any(isinstance(n, Aggregate) for n in walk_post_order(node))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        # Spark turns `= FALSE` into a NOT; a FALSE told from an unknown would show
        (
            "SELECT k, (k, s, n) NOT IN (SELECT k, s, k FROM t1) AS f FROM t0",
            "SUBQUERY_EXPRESSION",
        ),
        ("SELECT k, (k IN (SELECT k FROM t1)) = FALSE AS f FROM t0", "SUBQUERY_EXPRESSION"),
        ("SELECT k, coalesce(k IN (SELECT k FROM t1), TRUE) AS f FROM t0", "SUBQUERY_EXPRESSION"),
        # an aggregate without GROUP BY has a row over no rows: EXISTS is then TRUE
        (
            "SELECT k FROM t0 WHERE EXISTS (SELECT MAX(t1.k) FROM t1 WHERE t1.k = 7)",
            "SUBQUERY_EXPRESSION",
        ),
        ("SELECT k, EXISTS (SELECT COUNT(*) FROM t1) AS f FROM t0", "SUBQUERY_EXPRESSION"),
        # ... also where the EXISTS sits in a window of the outer query (helper-28)
        (
            "SELECT k, SUM(n) OVER (PARTITION BY EXISTS (SELECT MAX(t1.k) FROM t1 "
            "WHERE t1.k = 7)) AS w FROM t0",
            "SUBQUERY_EXPRESSION",
        ),
        (
            "SELECT k FROM t0 WHERE n > 1 OR EXISTS (SELECT t1.k FROM t1 GROUP BY t1.k)",
            "SUBQUERY_EXPRESSION",
        ),
        (
            "SELECT k FROM t0 WHERE k IN (SELECT t1.k FROM t1 WHERE t1.s = t0.s) OR n > 1",
            "CORRELATED_IN",
        ),
        ("SELECT k FROM t0 WHERE s IN (SELECT k FROM t1) OR n > 1", "KEY_TYPES"),
        # Spark folds a NULL value's IN to NULL before it reads the subquery (helper-27)
        ("SELECT k, CAST(NULL AS INT) IN (SELECT k FROM t1) AS f FROM t0", "SUBQUERY_EXPRESSION"),
        ("SELECT k FROM t0 WHERE k + NULL NOT IN (SELECT k FROM t1)", "SUBQUERY_EXPRESSION"),
        ("SELECT k FROM t0 WHERE (k, NULL) NOT IN (SELECT k, n FROM t0)", "SUBQUERY_EXPRESSION"),
        # a key column of no type cannot be kept in state
        ("SELECT k, k IN (SELECT NULL FROM t1) AS f FROM t0", "KEY_TYPES"),
        # an aggregating SELECT's own value
        (
            "SELECT s, COUNT(*) IN (SELECT k FROM t1) AS f FROM t0 GROUP BY s",
            "SUBQUERY_EXPRESSION",
        ),
    ],
)
def test_truth_subqueries_whose_answer_is_not_a_flag_stay_full(sql: str, code: str) -> None:
    with pytest.raises(NotIncremental) as err:
        build_plan(sql, SCHEMA, qualify)
    assert err.value.code == code


def test_an_in_subquery_sharing_an_outer_alias_has_its_own_renamed() -> None:
    query = sqlglot.parse_one(
        "SELECT t0.n FROM t0 AS t0 WHERE t0.k IN (SELECT t0.k FROM t1 AS t0)", read="spark"
    )
    renamed = truth_subqueries._renamed_apart(query, {"t0", "x"})
    assert renamed.sql("spark") == (
        "SELECT __dyntables_r0.n FROM t0 AS __dyntables_r0 WHERE __dyntables_r0.k IN "
        "(SELECT __dyntables_r0.k FROM t1 AS __dyntables_r0)"
    )
    untouched = sqlglot.parse_one("SELECT a.k FROM t1 AS a", read="spark")
    assert truth_subqueries._renamed_apart(untouched.copy(), {"t0"}) == untouched


def test_a_counted_exists_is_not_asked_whether_spark_proves_it_empty() -> None:
    """Spark answers a COUNT subquery over an input it proves empty with NULL, so such a
    subquery of the user's is recomputed; an EXISTS counted here is answered by Spark as
    an EXISTS, FALSE, which the count gives."""
    exists = "SELECT k FROM t0 WHERE n > 1 OR EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k AND 1 = 0)"
    assert build_plan(exists, SCHEMA, qualify).not_provably_empty == ()
    count = "SELECT k, (SELECT COUNT(*) FROM t1 WHERE t1.k = t0.k AND 1 = 0) AS c FROM t0"
    assert len(build_plan(count, SCHEMA, qualify).not_provably_empty) == 1


def test_a_two_column_not_in_counts_each_way_a_row_can_match() -> None:
    """``(k, s) NOT IN (SELECT k, s ...)`` as a value: Spark's existence join matches a
    row where each column is equal or either side NULL. One count per set of columns
    compared equal (both, k, s, none), each telling which other columns its rows have
    NULL: four joins, not one per NULL pattern of both sides (nine)."""
    root = build_plan(
        "SELECT k, (k, s) NOT IN (SELECT k, s FROM t1) AS f FROM t0", SCHEMA, qualify
    ).root
    counts = [n for n in walk_post_order(root) if isinstance(n, Join) and _has_aggregate(n.right)]
    # compared on no column: one count for all rows, joined to every outer row
    assert sorted(j.kind for j in counts) == ["inner", "left", "left", "left"]
