"""Values read out of a MAP column at a constant key (``attrs['src']``): the scan reads
each as a column of its own, and the MAP itself is not read.

Spark cannot group or compare MAP values, and a change is consolidated by the columns
the plan scans (refresh/changes.py), so a query reading a MAP column was FULL
(MAP_COLUMN), also when it only took values out of it: a staging model's usual pattern
(helper-25). A value at a constant key is fixed by its row, like any column: the
change of the scan projected to it is still a Z-set, and consolidating by it is exact.

The name of such a scanned column says what it reads (the MAP column and the key), so
whatever reads a plan's scanned columns (the change capture, its schema checks, the
old and new versions of a scan) can read it without the plan.

Pure sqlglot: no Spark here.
"""

from __future__ import annotations

import hashlib
import json

import sqlglot
from sqlglot import exp

from dyntables.sql.tokens import back_quoted

PREFIX = "__dt_map_"


def value_column(column: str, key: exp.Expr) -> str:
    """The name of the scanned column holding ``column[key]``."""
    text = json.dumps([column, key.sql("spark")], separators=(",", ":"))
    return PREFIX + text.encode("utf-8").hex()


def output_name(scan_output: str, key: exp.Expr) -> str:
    """The plan's name for the value: one per MAP column of a scan and key."""
    digest = hashlib.sha1(key.sql("spark").encode("utf-8")).hexdigest()[:10]
    return f"{scan_output}__at_{digest}"


def _decoded(name: str) -> tuple[str, str] | None:
    if not name.startswith(PREFIX):
        return None
    try:
        column, key = json.loads(bytes.fromhex(name[len(PREFIX) :]).decode("utf-8"))
    except (ValueError, TypeError):
        return None  # a source's own column that happens to start so
    return str(column), str(key)


def base_column(name: str) -> str:
    """The source column a scanned column reads: itself, or the MAP a value is taken from."""
    decoded = _decoded(name)
    return decoded[0] if decoded else name


def source_expr(name: str) -> exp.Expr:
    """What a scan selects from its source for a scanned column."""
    decoded = _decoded(name)
    if decoded is None:
        return exp.column(name)
    column, key = decoded
    return sqlglot.parse_one(f"{back_quoted(column)}[{key}]", read="spark")


def source_sql(name: str) -> str:
    """``source_expr`` as Spark SQL (a DataFrame ``selectExpr`` item, before its alias)."""
    return back_quoted(name) if _decoded(name) is None else source_expr(name).sql("spark")


def value_type(map_type: str) -> str | None:
    """The value type of a ``map<k,v>`` type string, or None for another type."""
    text = map_type.strip()
    if not text.lower().startswith("map<") or not text.endswith(">"):
        return None
    inner, depth = text[4:-1], 0
    for i, ch in enumerate(inner):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            return inner[i + 1 :].strip()
    return None
