"""The SQL builders, pure (no Spark)."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from dyntables.ivm.sqlb import group_key


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
