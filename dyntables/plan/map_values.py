"""Values read out of a MAP column at a constant key (``attrs['src']``): the scan reads
each as a column of its own, and the MAP itself is not read; and a MAP taken apart.

Spark cannot group or compare MAP values, and a change is consolidated by the columns
the plan scans (refresh/changes.py), so a query reading a MAP column was FULL
(MAP_COLUMN), also when it only took values out of it: a staging model's usual pattern
(helper-25). A value at a constant key is fixed by its row, like any column: the
change of the scan projected to it is still a Z-set, and consolidating by it is exact.

A MAP read whole by a call that takes it apart (``explode(attrs)``, ``size(attrs)``,
``map_keys(attrs)``, ``attrs[k]`` at a key read from the row) is scanned as its entries
(``map_entries``: an array of (key, value) structs, which Spark can group when the
value can be grouped), and the call reads ``map_from_entries`` of them: the same MAP,
its entries in the same order. A projection that passes a MAP on (a CTE's ``SELECT *``)
passes on what is read of it instead (plan/maps.py). A MAP the table holds is
carried as its entries too, and written and matched as them (refresh/apply.py), and so
is one a UNION ALL passes on (read above it from its entries). A MAP read otherwise
(compared, aggregated) stays FULL.

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


def entries_column(column: str) -> str:
    """The name of the scanned column holding ``map_entries(column)``: the whole MAP as
    an array of (key, value) structs, in the MAP's own order, which Spark can group."""
    return PREFIX + json.dumps([column], separators=(",", ":")).encode("utf-8").hex()


def entries_output(scan_output: str) -> str:
    """The plan's name for a MAP column's entries: one per MAP column of a scan."""
    return f"{scan_output}__entries"


def _decoded(name: str) -> tuple[str, str | None] | None:
    """(MAP column, key) of a value's column; (MAP column, None) of an entries column."""
    if not name.startswith(PREFIX):
        return None
    try:
        parts = json.loads(bytes.fromhex(name[len(PREFIX) :]).decode("utf-8"))
    except (ValueError, TypeError):
        return None  # a source's own column that happens to start so
    if isinstance(parts, list) and len(parts) == 1:
        return str(parts[0]), None
    if isinstance(parts, list) and len(parts) == 2:
        return str(parts[0]), str(parts[1])
    return None


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
    if key is None:
        return sqlglot.parse_one(f"map_entries({back_quoted(column)})", read="spark")
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


def groupable(type_sql: str) -> bool:
    """Spark cannot group, join or compare MAP values (nor anything containing one)."""
    return "map<" not in type_sql.lower()
