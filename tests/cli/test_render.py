"""render_table and friends: pure, no Spark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pyspark.sql import Row

from dyntables.cli.render import (
    MAX_CELL_WIDTH,
    any_clipped,
    display_width,
    format_value,
    render_table,
    row_count_line,
)


def test_table_layout_with_right_aligned_numbers_and_null() -> None:
    text = render_table(
        ["id", "name", "amount"],
        [(1, "alice", Decimal("10.50")), (20, None, None), (3, "bob", Decimal("7.25"))],
    )
    assert text == (
        "id | name  | amount\n"
        "---+-------+-------\n"
        " 1 | alice |  10.50\n"
        "20 | NULL  |   NULL\n"
        " 3 | bob   |   7.25"
    )


def test_mixed_column_is_left_aligned() -> None:
    text = render_table(["v"], [(1,), ("abc",)])
    assert text.splitlines()[2:] == ["1", "abc"]


def test_booleans_are_not_numbers() -> None:
    text = render_table(["flag", "n"], [(True, 1), (False, 100)])
    assert text.splitlines() == ["flag  |   n", "------+----", "true  |   1", "false | 100"]


def test_no_rows_prints_header_and_separator() -> None:
    assert render_table(["a", "bb"], []) == "a | bb\n--+---"


def test_no_columns_renders_nothing() -> None:
    assert render_table([], []) == ""


def test_values_under_the_limit_are_not_truncated() -> None:
    value = "x" * 60
    assert render_table(["s"], [(value,)]).splitlines()[2] == value


def test_very_long_values_are_clipped_with_an_ellipsis() -> None:
    cell = format_value("y" * 500)
    assert cell.endswith("…")
    assert display_width(cell) == MAX_CELL_WIDTH


def test_wide_prints_long_values_and_headers_whole() -> None:
    value, header = "y" * 500, "h" * 90
    lines = render_table([header], [(value,)], wide=True).splitlines()
    assert (lines[0].rstrip(), lines[2]) == (header, value)
    assert any_clipped([header], []) and any_clipped(["s"], [(value,)])
    assert not any_clipped(["s"], [("y" * MAX_CELL_WIDTH,)])


def test_line_breaks_are_escaped_so_a_row_stays_on_one_line() -> None:
    text = render_table(["s"], [("a\nb\tc",)])
    assert text.splitlines()[2] == "a\\nb\\tc"


def test_wide_characters_are_aligned_by_display_width() -> None:
    lines = render_table(["name", "n"], [("日本", 1), ("abcdef", 2)]).splitlines()
    assert lines[2] == "日本   | 1"
    assert lines[3] == "abcdef | 2"


def test_format_value_for_spark_types() -> None:
    assert format_value(None) == "NULL"
    assert format_value(True) == "true"
    assert format_value(0.1) == "0.1"
    assert format_value(float("nan")) == "NaN"
    assert format_value(float("-inf")) == "-Infinity"
    assert format_value(Decimal("1.10")) == "1.10"
    assert format_value(dt.datetime(2024, 5, 1, 12, 30, 0)) == "2024-05-01 12:30:00"
    assert format_value(dt.date(2024, 5, 1)) == "2024-05-01"
    assert format_value(bytearray(b"\x01\xab")) == "0x01AB"
    assert format_value([1, None, "a"]) == "[1, NULL, a]"
    assert format_value({"k": 2}) == "{k: 2}"
    assert format_value(Row(a=1, b=None)) == "{a: 1, b: NULL}"


def test_row_count_line() -> None:
    assert row_count_line(1, truncated=False) == "(1 row)"
    assert row_count_line(0, truncated=False) == "(0 rows)"
    assert row_count_line(3, truncated=False) == "(3 rows)"
    assert "first 1000 rows" in row_count_line(1000, truncated=True)
    assert "--max-rows" in row_count_line(1000, truncated=True)
    assert row_count_line(2, truncated=False, clipped=True) == (
        f"(2 rows; values longer than {MAX_CELL_WIDTH} characters were cut, --wide prints them whole)"
    )
