"""Running SQL through the facade and turning the result into printable text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from dyntables.cli.render import any_clipped, render_table, row_count_line
from dyntables.engine.errors import translate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# What Spark returns for DDL/DML: a DataFrame with no columns.
NO_RESULT = "OK"


class SqlRunner(Protocol):
    """The one facade method the CLI needs (tests pass a borrowed Lakehouse)."""

    def sql(self, text: str) -> DataFrame: ...


def run_sql(lh: SqlRunner, text: str, max_rows: int, *, wide: bool = False) -> str:
    """Run a statement or script; the text of the last statement's result."""
    return render_result(lh.sql(text), max_rows, statement=text, wide=wide)


def render_result(df: Any, max_rows: int, *, statement: str = "", wide: bool = False) -> str:
    """Fetch at most ``max_rows`` + 1 rows (one extra tells us the result was cut)."""
    columns = list(df.columns)
    if not columns:
        return NO_RESULT
    try:
        # A SELECT is lazy: its runtime failures surface here, not in lh.sql().
        rows = df.limit(max_rows + 1).collect()
    except Exception as exc:
        raise translate(exc, statement) from exc
    truncated = len(rows) > max_rows
    shown = rows[:max_rows]
    clipped = not wide and any_clipped(columns, shown)
    footer = row_count_line(len(shown), truncated, clipped)
    return f"{render_table(columns, shown, wide=wide)}\n{footer}"
