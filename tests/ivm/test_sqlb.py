"""The SQL builders, pure (no Spark)."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from dyntables.ivm.sqlb import cast, group_key


@pytest.mark.parametrize(
    ("key", "grouped"),
    [
        ("0", "CAST(0 AS INT)"),  # Spark would read these as positions in the select list
        ("(2)", "CAST((2) AS INT)"),
        ("-1", "CAST(-1 AS INT)"),
        ("-2147483648", "CAST(-2147483648 AS INT)"),
        ("2147483648", "2147483648"),  # a BIGINT literal: a value to Spark already
        ("1.5", "1.5"),
        ("'0'", "'0'"),
        ("k + 0", "k + 0"),
        ("k", "k"),
    ],
)
def test_an_integer_literal_is_grouped_as_a_value(key: str, grouped: str) -> None:
    assert group_key(parse_one(key, dialect="spark")).sql("spark") == grouped


def test_a_cast_of_a_cast_is_written_whatever_the_types() -> None:
    # sqlglot's exp.cast leaves this one out (both are DECIMALs): a sum's change would
    # then be summed in its argument's type, not in its state's
    inner = parse_one("CAST(x AS DECIMAL(10,2))", dialect="spark")
    assert (
        cast(inner, "decimal(20,2)").sql("spark")
        == "CAST(CAST(x AS DECIMAL(10, 2)) AS DECIMAL(20, 2))"
    )


def test_a_cast_gets_a_type_of_its_own() -> None:
    first, second = cast(parse_one("x"), "decimal(20,2)"), cast(parse_one("y"), "decimal(20,2)")
    assert first.to is not second.to  # the cached type is copied: trees never share a node
    first.to.set("expressions", [])
    assert second.sql("spark") == "CAST(y AS DECIMAL(20, 2))"
