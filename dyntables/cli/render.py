"""Results as aligned plain-text tables, the way psql and the Spark SQL CLI print them.

Pure functions over plain Python values (what ``Row`` objects hold), so the layout is
tested without Spark. Plain text rather than box drawing: output is piped into files,
``diff`` and ``grep`` as often as it is read on a terminal.
"""

from __future__ import annotations

import datetime as dt
import math
import unicodedata
from collections.abc import Sequence
from decimal import Decimal

NULL = "NULL"
# Values up to this many terminal columns print whole; longer ones end in an ellipsis so
# one huge JSON blob does not push every other column off the screen.
MAX_CELL_WIDTH = 80
ELLIPSIS = "…"
_ESCAPES = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def render_table(
    columns: Sequence[str], rows: Sequence[Sequence[object]], *, wide: bool = False
) -> str:
    """Header, separator and one line per row; numeric columns are right-aligned.
    ``wide`` prints every value whole (EXPLAIN's delta SQL, a definition, stats).

    Returns "" when there are no columns (statements that return nothing).
    """
    if not columns:
        return ""
    cells = [[format_value(value, wide=wide) for value in row] for row in rows]
    numeric = [_is_numeric_column(rows, index) for index in range(len(columns))]
    headers = [str(name) if wide else _clip(str(name)) for name in columns]
    widths = [
        max([display_width(headers[i])] + [display_width(row[i]) for row in cells])
        for i in range(len(columns))
    ]
    lines = [_line(headers, widths, numeric)]
    lines.append("-+-".join("-" * width for width in widths))
    lines.extend(_line(row, widths, numeric) for row in cells)
    return "\n".join(lines)


def row_count_line(shown: int, truncated: bool, clipped: bool = False) -> str:
    """The footer; when truncated the total is unknown (only max_rows + 1 were fetched).
    When a value was cut, it says how to see it whole."""
    if truncated:
        noun = "row" if shown == 1 else "rows"
        line = f"(output truncated to the first {shown} {noun}; raise --max-rows to see more"
    else:
        line = f"({shown} row" if shown == 1 else f"({shown} rows"
    if clipped:
        line += (
            f"; values longer than {MAX_CELL_WIDTH} characters were cut, --wide prints them whole"
        )
    return line + ")"


def format_value(value: object, *, wide: bool = False) -> str:
    """One value as a single line of text: NULL for None, escapes for line breaks."""
    text = _one_line(value)
    return text if wide else _clip(text)


def any_clipped(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> bool:
    """Would ``render_table`` without ``wide`` cut a header or a value?"""
    texts = [*map(str, columns), *(_one_line(v) for row in rows for v in row)]
    return any(display_width(text) > MAX_CELL_WIDTH for text in texts)


def _one_line(value: object) -> str:
    return _text(value).translate(_ESCAPES)


def display_width(text: str) -> int:
    """Terminal columns taken by ``text``: wide East Asian characters count twice."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _text(value: object) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex().upper()
    fields = getattr(value, "__fields__", None)  # pyspark Row (a struct), without importing it
    if fields is not None and isinstance(value, tuple):
        return (
            "{" + ", ".join(f"{k}: {_text(v)}" for k, v in zip(fields, value, strict=False)) + "}"
        )
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_text(k)}: {_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return str(value)


def _is_numeric_column(rows: Sequence[Sequence[object]], index: int) -> bool:
    values = [row[index] for row in rows if row[index] is not None]
    return bool(values) and all(_is_number(v) for v in values)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _clip(text: str) -> str:
    if display_width(text) <= MAX_CELL_WIDTH:
        return text
    kept, width = [], 0
    for char in text:
        width += display_width(char)
        if width > MAX_CELL_WIDTH - 1:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


def _line(cells: Sequence[str], widths: Sequence[int], numeric: Sequence[bool]) -> str:
    parts = []
    for cell, width, right in zip(cells, widths, numeric, strict=True):
        pad = " " * (width - display_width(cell))
        parts.append(pad + cell if right else cell + pad)
    return " | ".join(parts).rstrip()
