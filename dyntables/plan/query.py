"""The DT's query as a sqlglot tree: what it reads, whether it is deterministic, and the
same query with every source pinned to a snapshot (``VERSION AS OF``).

Pure: no Spark import. Names are qualified by a caller-supplied function so the rules
of the current catalog/namespace stay in the facade.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dyntables.errors import NonDeterministicQueryError, SqlSyntaxError, UnsupportedQueryError
from dyntables.sql.tokens import TableName

Qualifier = Callable[[TableName], TableName]

# Functions whose value changes between two evaluations over the same data.
NON_DETERMINISTIC_CLASSES: tuple[type[exp.Expr], ...] = (
    exp.Rand,
    exp.Randn,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.Localtimestamp,
    exp.Shuffle,
)
NON_DETERMINISTIC_NAMES = frozenset(
    {
        "now",
        "random",
        "rand",
        "randn",
        "uuid",
        "monotonically_increasing_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "spark_partition_id",
        "current_timestamp",
        "current_date",
        "localtimestamp",
        "unix_timestamp",
        "current_timezone",
        "curdate",
    }
)


_WINDOW_FN = "dyntables_window_fn"


def _protect_window_function(text: str) -> str:
    """sqlglot reads WINDOW as the named-window keyword, so Spark's time-bucket function
    ``window(ts, '1 hour')`` does not parse; give the call a placeholder name."""
    from sqlglot.tokens import TokenType

    from dyntables.sql.tokens import tokenize

    try:
        tokens = tokenize(text)
    except Exception:
        return text
    out, last = [], 0
    for tok, nxt in zip(tokens, tokens[1:], strict=False):
        if tok.text.upper() == "WINDOW" and nxt.token_type == TokenType.L_PAREN and tok.token_type != TokenType.STRING:
            out.append(text[last : tok.start])
            out.append(_WINDOW_FN)
            last = tok.end + 1
    out.append(text[last:])
    return "".join(out)


def _restore_window_function(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous) and node.name.lower() == _WINDOW_FN:
        return exp.Anonymous(this="window", expressions=node.expressions)
    return node


def parse_query(text: str) -> exp.Query:
    """Parse a DT's defining query; it must be a SELECT (or set operation of SELECTs)."""
    protected = _protect_window_function(text)
    try:
        trees = [t.transform(_restore_window_function) for t in sqlglot.parse(protected, read="spark") if t is not None]
    except ParseError as exc:
        first = str(exc).splitlines()[0]
        raise SqlSyntaxError(f"cannot parse the dynamic table's query: {first}") from exc
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise UnsupportedQueryError(
            "a dynamic table is defined by one SELECT query (AS SELECT ...); "
            f"got: {' '.join(text.split())[:80]}"
        )
    return trees[0]


def table_name(table: exp.Table) -> TableName:
    return TableName(tuple(p.name for p in table.parts))


def _cte_names(query: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}


def source_tables(query: exp.Query, qualify: Qualifier) -> list[TableName]:
    """The tables the query reads, qualified, in first-seen order, CTE names excluded."""
    ctes = _cte_names(query)
    seen: dict[TableName, None] = {}
    for table in query.find_all(exp.Table):
        if not table.name:
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        seen[qualify(table_name(table))] = None
    return list(seen)


def non_deterministic_calls(query: exp.Expr) -> list[str]:
    found: list[str] = []
    for node in query.walk():
        if isinstance(node, NON_DETERMINISTIC_CLASSES):
            found.append(node.sql("spark"))
        elif isinstance(node, exp.StrToUnix) and not node.this:
            found.append("unix_timestamp()")
        elif isinstance(node, exp.Anonymous) and node.name.lower() in NON_DETERMINISTIC_NAMES:
            found.append(node.sql("spark"))
    return found


def check_deterministic(query: exp.Query, dt_name: str) -> None:
    calls = non_deterministic_calls(query)
    if calls:
        raise NonDeterministicQueryError(
            f"dynamic table {dt_name} uses the non-deterministic function {calls[0]}: a dynamic "
            "table must give the same rows for the same source data. Pass the value in as a "
            "literal (e.g. DATE '2024-01-01') or read it from a source column instead"
        )


def pin_sources(
    query: exp.Query, qualify: Qualifier, versions: Mapping[TableName, int | None]
) -> exp.Query:
    """A copy of ``query`` reading every source at its snapshot.

    A source with no snapshot yet (never written) reads as empty, so that a commit racing
    with the refresh cannot slip in unrecorded.
    """
    ctes = _cte_names(query)
    pinned = query.copy()
    for table in list(pinned.find_all(exp.Table)):
        if not table.name or (not table.db and table.name.lower() in ctes):
            continue
        name = qualify(table_name(table))
        alias = table.alias or table.name
        full = exp.to_table(".".join(f"`{p}`" for p in name.parts), dialect="spark")
        if table.args.get("version") is not None:  # the user pinned it: keep their version
            full.set("version", table.args["version"].copy())
            full.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            table.replace(full)
            continue
        snapshot = versions[name]
        if snapshot is None:
            empty = exp.select("*").from_(full).where(exp.false()).subquery(alias)
            table.replace(empty)
            continue
        full.set("version", exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(snapshot)))
        full.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        table.replace(full)
    return pinned
