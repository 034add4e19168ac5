"""The grammar of our statements: one small parse function per statement family.

Adding a statement is one function decorated with ``@statement(first words...)``.
Each function receives a :class:`TokenStream` positioned after its leading words and
returns frozen data; anything no function claims is a :class:`SparkStatement`.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot.tokens import TokenType

from dyntables.sql.statements import (
    ALTER_TAG,
    REFRESH_MODES,
    AlterDynamicTable,
    ColumnSpec,
    CreateDynamicTable,
    DescribeDynamicTable,
    DropDynamicTable,
    ExplainDynamicTable,
    RefreshDynamicTable,
    SetTableProperties,
    ShowDynamicTables,
    ShowRefreshHistory,
    SparkStatement,
    Statement,
    UndropTable,
    interval_seconds,
)
from dyntables.sql.tokens import TableName, TokenStream, back_quoted

Parser = Callable[[TokenStream], Statement]
_PARSERS: list[tuple[tuple[tuple[str, ...], ...], Parser]] = []


def statement(*prefixes: str) -> Callable[[Parser], Parser]:
    """Register a parser for statements starting with any of ``prefixes`` (space-separated words)."""

    def register(fn: Parser) -> Parser:
        _PARSERS.append((tuple(tuple(p.split()) for p in prefixes), fn))
        return fn

    return register


def parse_statement(text: str) -> Statement:
    """Parse one statement (no trailing semicolon)."""
    ts = TokenStream(text)
    for prefixes, fn in _PARSERS:
        for words in prefixes:
            if ts.accept(*words):
                result = fn(ts)
                if not ts.at_end():
                    raise ts.error("unexpected text")
                return result
    return _spark_statement(TokenStream(text, ts.tokens))


# -- dynamic table statements ---------------------------------------------------------


@statement("CREATE DYNAMIC TABLE", "CREATE OR REPLACE DYNAMIC TABLE")
def _create(ts: TokenStream) -> Statement:
    or_replace = _was_or_replace(ts)
    if_not_exists = ts.accept("IF", "NOT", "EXISTS")
    name = ts.name()
    columns: list[ColumnSpec] = []
    if ts.accept_punct(TokenType.L_PAREN):
        while True:
            col = ts.word()
            comment = ts.string() if ts.accept("COMMENT") else None
            columns.append(ColumnSpec(col, comment))
            if not ts.accept_punct(TokenType.COMMA):
                break
        ts.punct(TokenType.R_PAREN)
    opts: dict[str, object] = {}
    while not ts.at("AS"):
        if ts.at_end():
            raise ts.error("expected AS <select>")
        if ts.accept("PARTITIONED", "BY"):
            opts["partitioned_by"] = tuple(_partition_items(ts))
        elif ts.accept("COMMENT"):
            opts["comment"] = ts.string()
        elif ts.accept("REFRESH_MODE"):
            ts.accept_punct(TokenType.EQ)
            opts["refresh_mode"] = _refresh_mode(ts)
        elif ts.accept("REFRESH"):
            if ts.accept("INTERVAL"):
                opts["interval_seconds"] = _interval(ts)
        elif ts.accept("VCLUSTER"):
            opts["vcluster"] = ts.word().upper()
        elif ts.accept("PROPERTIES") or ts.accept("TBLPROPERTIES"):
            opts["properties"] = tuple(_properties(ts))
        else:
            raise ts.error(
                "unknown dynamic table option (expected PARTITIONED BY, COMMENT, REFRESH"
                " INTERVAL n unit, REFRESH_MODE, VCLUSTER, PROPERTIES or AS <select>)"
            )
    ts.expect("AS")
    query = ts.rest()
    if not query:
        raise ts.error("expected a SELECT after AS")
    return CreateDynamicTable(
        text=ts.text,
        name=name,
        query=query,
        or_replace=or_replace,
        if_not_exists=if_not_exists,
        columns=tuple(columns),
        **opts,  # type: ignore[arg-type]
    )


def _was_or_replace(ts: TokenStream) -> bool:
    return any(t.text.upper() == "REPLACE" for t in ts.tokens[: ts.pos])


@statement("REFRESH DYNAMIC TABLE")
def _refresh(ts: TokenStream) -> Statement:
    name = ts.name()
    return RefreshDynamicTable(text=ts.text, name=name, full=ts.accept("FULL"))


@statement("SHOW DYNAMIC TABLE REFRESH HISTORY", "SHOW DYNAMIC TABLES REFRESH HISTORY")
def _history(ts: TokenStream) -> Statement:
    where = None
    limit = None
    end = len(ts.tokens)
    if end - ts.pos >= 2 and ts.tokens[end - 2].text.upper() == "LIMIT":
        tok = ts.tokens[end - 1]
        if tok.token_type != TokenType.NUMBER or not tok.text.isdigit():
            raise ts.error("expected a whole number after LIMIT", tok)
        limit = int(tok.text)
        end -= 2
    if ts.accept("WHERE"):
        where = ts.raw_between(ts.pos, end)
        if not where:
            raise ts.error("expected a condition after WHERE")
    elif ts.pos < end:
        raise ts.error("expected WHERE or LIMIT")
    ts.pos = len(ts.tokens)
    return ShowRefreshHistory(text=ts.text, where=where, limit=limit)


@statement("SHOW DYNAMIC TABLES")
def _show(ts: TokenStream) -> Statement:
    namespace = ts.name() if ts.accept("IN") or ts.accept("FROM") else None
    like = ts.string() if ts.accept("LIKE") else None
    return ShowDynamicTables(text=ts.text, like=like, namespace=namespace)


@statement("DESCRIBE DYNAMIC TABLE", "DESC DYNAMIC TABLE")
def _describe(ts: TokenStream) -> Statement:
    extended = ts.accept("EXTENDED")
    name = ts.name()
    extended = ts.accept("EXTENDED") or extended
    return DescribeDynamicTable(text=ts.text, name=name, extended=extended)


@statement("DROP DYNAMIC TABLE")
def _drop(ts: TokenStream) -> Statement:
    if_exists = ts.accept("IF", "EXISTS")
    return DropDynamicTable(text=ts.text, name=ts.name(), if_exists=if_exists)


@statement("UNDROP TABLE", "UNDROP DYNAMIC TABLE")
def _undrop(ts: TokenStream) -> Statement:
    return UndropTable(text=ts.text, name=ts.name())


@statement("ALTER DYNAMIC TABLE")
def _alter(ts: TokenStream) -> Statement:
    name = ts.name()
    if ts.accept("REFRESH"):  # Snowflake's spelling of a manual refresh
        return RefreshDynamicTable(text=ts.text, name=name, full=ts.accept("FULL"))
    if ts.accept("SUSPEND"):
        return AlterDynamicTable(text=ts.text, name=name, action="SUSPEND")
    if ts.accept("RESUME"):
        return AlterDynamicTable(text=ts.text, name=name, action="RESUME")
    if not ts.accept("SET"):
        raise ts.error("expected SUSPEND, RESUME, REFRESH or SET")
    if ts.accept("REFRESH_MODE"):
        ts.accept_punct(TokenType.EQ)
        return AlterDynamicTable(
            text=ts.text, name=name, action="SET", refresh_mode=_refresh_mode(ts)
        )
    if ts.accept("REFRESH"):
        if ts.accept("INTERVAL"):
            return AlterDynamicTable(
                text=ts.text, name=name, action="SET", interval_seconds=_interval(ts)
            )
        return AlterDynamicTable(text=ts.text, name=name, action="SET", clear_interval=True)
    if ts.accept("VCLUSTER"):
        return AlterDynamicTable(text=ts.text, name=name, action="SET", vcluster=ts.word().upper())
    raise ts.error(
        "expected SUSPEND, RESUME, SET REFRESH INTERVAL, SET REFRESH_MODE or SET VCLUSTER"
    )


@statement("EXPLAIN DYNAMIC TABLE", "EXPLAIN REFRESH DYNAMIC TABLE", "EXPLAIN REFRESH")
def _explain(ts: TokenStream) -> Statement:
    return ExplainDynamicTable(text=ts.text, name=ts.name())


# -- statements that are Spark's, with the seeds' spelling or a guard ---------------------


@statement("ALTER TABLE")
def _alter_table(ts: TokenStream) -> Statement:
    name = ts.name()
    if ts.accept("SET", "PROPERTIES"):
        return SetTableProperties(text=ts.text, name=name, properties=tuple(_properties(ts)))
    tags = any(
        ts.at(*words, "TAG")
        for words in (("CREATE",), ("CREATE", "OR", "REPLACE"), ("REPLACE",), ("DROP",))
    )
    ts.pos = len(ts.tokens)
    return SparkStatement(text=ts.text, verb=ALTER_TAG if tags else "ALTER", writes=name)


def _spark_statement(ts: TokenStream) -> SparkStatement:
    """Classify a pass-through statement by the table it would modify (for the guards)."""
    verb = None
    target = None
    if ts.at("WITH") or ts.at("FROM"):
        # a CTE, or Hive's FROM-first form (several INSERTs of one FROM), before INSERT:
        # the statement writes where its INSERTs at the top level say (helper-26)
        targets = _top_level_inserts(ts)
        if targets:
            return SparkStatement(
                text=ts.text, verb="INSERT", writes=targets[0], also_writes=tuple(targets[1:])
            )
        return SparkStatement(text=ts.text)
    if ts.accept("INSERT"):
        verb = "INSERT"
        ts.accept("INTO") or ts.accept("OVERWRITE")
        ts.accept("TABLE")
        target = ts.name()
    elif ts.accept("CREATE", "OR", "REPLACE", "TABLE") or ts.accept("REPLACE", "TABLE"):
        verb, target = "REPLACE", ts.name()
    elif ts.accept("UPDATE"):
        verb, target = "UPDATE", ts.name()
    elif ts.accept("DELETE", "FROM"):
        verb, target = "DELETE", ts.name()
    elif ts.accept("MERGE", "INTO"):
        verb, target = "MERGE", ts.name()
    elif ts.accept("TRUNCATE", "TABLE"):
        verb, target = "TRUNCATE", ts.name()
    elif ts.accept("DROP", "TABLE"):
        ts.accept("IF", "EXISTS")
        verb, target = "DROP", ts.name()
    elif ts.accept("USE"):  # moves where unqualified names resolve (see Lakehouse.execute)
        verb = "USE"
    return SparkStatement(text=ts.text, verb=verb, writes=target)


def _top_level_inserts(ts: TokenStream) -> list[TableName]:
    targets: list[TableName] = []
    depth = 0
    while not ts.at_end():
        tok = ts.peek()
        assert tok is not None
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and ts.accept("INSERT"):
            ts.accept("INTO") or ts.accept("OVERWRITE")
            ts.accept("TABLE")
            targets.append(ts.name())
            continue
        ts.next()
    return targets


# -- pieces --------------------------------------------------------------------------------


def _interval(ts: TokenStream) -> int:
    amount = ts.integer()
    unit = ts.word().upper()
    try:
        seconds = interval_seconds(amount, unit)
    except KeyError:
        raise ts.error(
            f"unknown interval unit '{unit}' (use SECOND, MINUTE, HOUR or DAY)"
        ) from None
    if seconds < 1:
        raise ts.error("the refresh interval must be at least 1 second")
    return seconds


def _refresh_mode(ts: TokenStream) -> str:
    mode = ts.word().upper()
    if mode not in REFRESH_MODES:
        raise ts.error(f"unknown REFRESH_MODE '{mode}' (use AUTO, INCREMENTAL or FULL)")
    return mode


# Iceberg's partition transforms, as Spark's DDL writes them
PARTITION_TRANSFORMS = frozenset({"years", "months", "days", "hours", "bucket", "truncate"})


def _partition_items(ts: TokenStream) -> list[str]:
    ts.punct(TokenType.L_PAREN)
    items = [_partition_item(ts)]
    while ts.accept_punct(TokenType.COMMA):
        items.append(_partition_item(ts))
    ts.punct(TokenType.R_PAREN)
    return items


def _partition_item(ts: TokenStream) -> str:
    """A column (``a``), or an Iceberg transform of one, kept as written in normal form:
    ``days(order_ts)``, ``bucket(16, id)``, ``truncate(s, 4)``."""
    name = ts.word()
    if not ts.accept_punct(TokenType.L_PAREN):
        return name
    if name.lower() not in PARTITION_TRANSFORMS:
        raise ts.error(
            f"unknown partition transform {name}: use a column, or years, months, days, "
            "hours, bucket or truncate of one"
        )
    args = [_transform_arg(ts)]
    while ts.accept_punct(TokenType.COMMA):
        args.append(_transform_arg(ts))
    ts.punct(TokenType.R_PAREN)
    return f"{name.lower()}({', '.join(args)})"


def _transform_arg(ts: TokenStream) -> str:
    tok = ts.peek()
    if tok is not None and tok.token_type == TokenType.NUMBER:
        return ts.literal()
    return back_quoted(ts.word())


def _properties(ts: TokenStream) -> list[tuple[str, str]]:
    ts.punct(TokenType.L_PAREN)
    props = []
    while True:
        key = ts.literal()
        ts.punct(TokenType.EQ)
        props.append((key, ts.literal()))
        if not ts.accept_punct(TokenType.COMMA):
            break
    ts.punct(TokenType.R_PAREN)
    return props
