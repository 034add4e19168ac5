"""One GROUP BY per grouping set (plan/grouping_sets.py): pure sqlglot."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from dyntables.plan.grouping_sets import branch, expand, over_rows


def _branches(sql: str) -> list[str]:
    select = sqlglot.parse_one(sql, read="spark")
    assert isinstance(select, exp.Select)
    expanded = expand(select.args["group"])
    assert expanded is not None
    sets, everything = expanded
    return [branch(select, keys, everything).sql("spark") for keys in sets]


def test_a_key_of_the_set_is_its_grouped_value_whatever_is_outside_the_set() -> None:
    """Spark matches ``coalesce(k, 0)`` to the grouping expression before its parts: in
    the set (coalesce(k, 0)) it is the key's value, not coalesce(NULL, 0)."""
    assert _branches(
        "SELECT k, coalesce(k, 0) AS c, COUNT(*) AS n FROM t "
        "GROUP BY GROUPING SETS ((k, coalesce(k, 0)), (coalesce(k, 0)), ())"
    ) == [
        "SELECT k, COALESCE(k, 0) AS c, COUNT(*) AS n FROM t GROUP BY k, COALESCE(k, 0)",
        "SELECT NULL, COALESCE(k, 0) AS c, COUNT(*) AS n FROM t GROUP BY COALESCE(k, 0)",
        "SELECT NULL, NULL AS c, COUNT(*) AS n FROM t GROUP BY '()'",
    ]


def test_a_parenthesized_key_is_the_same_key_in_every_set() -> None:
    """``(a - b)`` inside the set ``(k, (a - b))`` and the set ``((a - b))`` written
    alone are one key (seed 730303: the first kept its parentheses, the second did
    not, and the select item ``(a - b)`` was NULL in the second set's rows, as a key
    outside it, where Spark answers its value)."""
    assert _branches(
        "SELECT k, (a - b) AS c, COUNT(*) AS n FROM t "
        "GROUP BY GROUPING SETS ((k, (a - b)), ((a - b)), ()), (k)"
    ) == [
        "SELECT k, (a - b) AS c, COUNT(*) AS n FROM t GROUP BY k, a - b",
        "SELECT k, (a - b) AS c, COUNT(*) AS n FROM t GROUP BY a - b, k",
        "SELECT k, (NULL) AS c, COUNT(*) AS n FROM t GROUP BY k",
    ]


def _over_rows(sql: str) -> exp.Select:
    select = sqlglot.parse_one(sql, read="spark")
    assert isinstance(select, exp.Select)
    expanded = expand(select.args["group"])
    assert expanded is not None
    rewritten = over_rows(select, expanded[1])
    assert rewritten is not None
    return rewritten


def test_a_literal_that_is_a_key_is_read_from_the_sets_rows() -> None:
    """``'ab'`` grouped in one set and not in another is NULL in the rows of the other,
    as Spark matches the select item to the grouping expression (seed 530193: the
    literal stayed in place above the rows, 'ab' where Spark answers NULL)."""
    rewritten = _over_rows(
        "SELECT 'ab' AS c1, 'x' AS c2, RANK() OVER (PARTITION BY 'ab' ORDER BY COUNT(*)) AS r "
        "FROM t GROUP BY GROUPING SETS (('ab'), ())"
    )
    outer = [e.sql("spark") for e in rewritten.expressions]
    assert outer[0] == "_gs._gs0 AS c1"
    assert outer[1] == "'x' AS c2"  # not a key: a constant in every set
    assert outer[2] == "RANK() OVER (PARTITION BY _gs._gs1 ORDER BY _gs._gs2) AS r"


def test_constant_arguments_of_a_window_over_the_sets_stay_in_place() -> None:
    """Spark requires LAG's offset, NTILE's buckets and PERCENTILE's array to be
    constants: an expression of literals is left in the window, not made a column of
    the rows below (helper-31: CREATE failed, "should be a foldable INT")."""
    rewritten = _over_rows(
        "SELECT k, LAG(SUM(x), -1) OVER (ORDER BY k) AS a, NTILE(1 + 1) OVER (ORDER BY k) AS b, "
        "percentile(SUM(x), array(0.25, 0.75)) OVER () AS c, COUNT(*) OVER () AS d, "
        "grouping_id() AS g FROM t GROUP BY ROLLUP(k)"
    )
    outer = [e.sql("spark") for e in rewritten.expressions]
    assert outer[1].startswith("LAG(_gs.") and outer[1].endswith(
        ", -1) OVER (ORDER BY _gs._gs2) AS a"
    )
    assert outer[2] == "NTILE(1 + 1) OVER (ORDER BY _gs._gs3) AS b"
    assert "ARRAY(0.25, 0.75)) OVER () AS c" in outer[3]
    assert outer[4] == "COUNT(*) OVER () AS d"
    # read from the sets' rows: a grouping function, aggregates and keys
    rows = [e.sql("spark") for e in rewritten.args["from_"].this.this.expressions]
    assert rows == [
        "k AS _gs0",
        "SUM(x) AS _gs1",
        "k AS _gs2",
        "k AS _gs3",
        "SUM(x) AS _gs4",
        "GROUPING_ID() AS _gs5",
    ]


def test_grouping_of_a_parenthesized_key_is_the_keys_bit() -> None:
    """``GROUPING((k + 1))`` names the key ``k + 1`` of ``ROLLUP((k + 1))`` (sqlglot
    keeps the parentheses on the call's argument, not on the key): it was refused as a
    column not grouped by (GROUPING_SETS, FULL)."""
    assert _branches(
        "SELECT (k + 1) AS c, GROUPING((k + 1)) AS g, grouping_id((k + 1), s) AS i "
        "FROM t GROUP BY ROLLUP((k + 1), s)"
    ) == [
        "SELECT (k + 1) AS c, CAST(0 AS TINYINT) AS g, CAST(0 AS BIGINT) AS i FROM t GROUP BY k + 1, s",
        "SELECT (k + 1) AS c, CAST(0 AS TINYINT) AS g, CAST(1 AS BIGINT) AS i FROM t GROUP BY k + 1",
        "SELECT (NULL) AS c, CAST(1 AS TINYINT) AS g, CAST(3 AS BIGINT) AS i FROM t GROUP BY '()'",
    ]


def test_a_nested_querys_grouping_is_its_own() -> None:
    """GROUPING(k) of a derived table's own ROLLUP(k) is not a key of the outer sets:
    it was refused as one (GROUPING_SETS, FULL) and is left to the nested query."""
    assert _branches(
        "SELECT q.i0, GROUPING(q.i0) AS g FROM (SELECT k AS i0, GROUPING(k) AS i4 "
        "FROM t GROUP BY ROLLUP(k)) AS q GROUP BY ROLLUP(q.i0)"
    ) == [
        "SELECT q.i0, CAST(0 AS TINYINT) AS g FROM (SELECT k AS i0, GROUPING(k) AS i4 "
        "FROM t GROUP BY ROLLUP (k)) AS q GROUP BY q.i0",
        "SELECT NULL, CAST(1 AS TINYINT) AS g FROM (SELECT k AS i0, GROUPING(k) AS i4 "
        "FROM t GROUP BY ROLLUP (k)) AS q GROUP BY '()'",
    ]
