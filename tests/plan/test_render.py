"""The text of a tree built in code keeps the grouping the tree means (plan/render.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dyntables.plan.render import spark_sql


def test_an_operand_built_in_code_keeps_its_grouping() -> None:
    arg = sqlglot.parse_one("NOT (n > 0)", read="spark")
    tree = exp.Not(this=exp.Is(this=arg, expression=exp.null()))
    assert tree.sql("spark") == "NOT NOT (n > 0) IS NULL"  # what Spark reads as (n > 0) IS NULL
    assert spark_sql(tree) == "NOT ((NOT (n > 0)) IS NULL)"
    key = sqlglot.parse_one("a OR b", read="spark")
    written = spark_sql(exp.NullSafeEQ(this=key, expression=exp.column("k")))
    assert written == "(a OR b) IS NOT DISTINCT FROM k"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # sqlglot's own parse: a sum of two intervals, written without its grouping
        ("ts - INTERVAL 1 DAY 2 HOURS", "ts - (INTERVAL '1' DAY + INTERVAL '2' HOURS)"),
        # ESCAPE belongs to its LIKE; ANY, EXISTS, field access and named arguments stay
        ("x LIKE 'a!%' ESCAPE '!'", "x LIKE 'a!%' ESCAPE '!'"),
        ("x = ANY (SELECT 1)", "x = ANY (SELECT 1)"),
        ("s.f.g + 1", "s.f.g + 1"),
        ("NOT y IN (1, 2 + 3)", "NOT (y IN (1, 2 + 3))"),
        ("z BETWEEN a + 1 AND b", "z BETWEEN (a + 1) AND b"),
    ],
)
def test_written_back_as_spark_reads_it(sql: str, expected: str) -> None:
    assert spark_sql(sqlglot.parse_one(sql, read="spark")) == expected


def test_a_name_spark_reads_only_back_quoted_is_written_so() -> None:
    # sqlglot leaves it bare (Python's \w takes ö); Spark's lexer takes ASCII letters only
    tree = exp.select(exp.column("größe").as_("c1")).from_("v")
    assert tree.sql("spark") == "SELECT größe AS c1 FROM v"
    assert spark_sql(tree) == "SELECT `größe` AS c1 FROM v"
    assert tree.sql("spark") == "SELECT größe AS c1 FROM v"  # the tree is left as it was


def test_a_name_spark_reads_as_a_literal_or_an_operator_is_back_quoted() -> None:
    tree = exp.select(*(exp.column(c) for c in ("true", "null", "not", "v"))).from_("t")
    assert tree.sql("spark") == "SELECT true, null, not, v FROM t"
    assert spark_sql(tree) == "SELECT `true`, `null`, `not`, v FROM t"
