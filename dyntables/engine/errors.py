"""Turning Spark's exceptions into our one-line errors with stable codes."""

from __future__ import annotations

import re
from typing import Any

from dyntables.errors import (
    AnalysisError,
    DynTablesError,
    ExecutionError,
    SqlSyntaxError,
    TableExistsError,
    TableNotFoundError,
)

_NOT_FOUND = {"TABLE_OR_VIEW_NOT_FOUND", "NO_SUCH_TABLE", "TABLE_NOT_FOUND"}
_EXISTS = {"TABLE_OR_VIEW_ALREADY_EXISTS", "TABLE_ALREADY_EXISTS"}


def first_line(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else message
    line = re.sub(r"\s*SQLSTATE: \w+\.?", "", line)
    return line.strip().rstrip(";")


def translate(exc: BaseException, statement: str = "") -> DynTablesError:
    """Map a PySpark/Py4J exception to a DynTablesError (the caller chains the cause)."""
    if isinstance(exc, DynTablesError):
        return exc
    from pyspark.errors import AnalysisException, ParseException

    error_class = _error_class(exc)
    message = spark_message(exc)
    snippet = _clip(statement)
    if isinstance(exc, ParseException) or error_class.startswith("PARSE_"):
        return SqlSyntaxError(f"{message} in: {snippet}")
    if error_class in _NOT_FOUND:
        name = _quoted_name(message)
        return TableNotFoundError(
            f"table or view {name} not found; check the name with SHOW TABLES (names resolve in the "
            "current schema, 'public' by default) or create it first" + _metadata_table_hint(name)
        )
    if error_class in _EXISTS:
        return TableExistsError(f"{message}; drop it first or use another name")
    if isinstance(exc, AnalysisException):
        return AnalysisError(f"{message} in: {snippet}")
    return ExecutionError(f"{message} in: {snippet}" if snippet else message)


def refresh_hint(exc: BaseException) -> str:
    """What to do, where Spark's message about a failed refresh leaves it open ("" when
    it does not). A function the refreshing session does not know is most often a
    Python UDF registered in the session that created the table, refreshed by a
    scheduler in another process."""
    if _error_class(exc) == "UNRESOLVED_ROUTINE":
        match = re.search(r"function `?([^`\s]+)`?", str(exc))
        name = match.group(1) if match else "it"
        return (
            f"; if {name} is a temporary function (spark.udf.register, CREATE TEMPORARY "
            "FUNCTION), it is known only to the session that registered it: register it "
            "in the session that refreshes (the scheduler's too)"
        )
    return ""


def spark_message(exc: BaseException) -> str:
    """The first line of the innermost cause's message, without its [ERROR_CLASS]."""
    return re.sub(r"^\[[A-Z_.]+\]\s*", "", first_line(root_message(exc)))


def root_message(exc: BaseException) -> str:
    """The innermost Java cause's message: Py4J reports a failed job as 'An error
    occurred while calling o80.collectToPython', which tells the user nothing."""
    try:
        cause = _java_cause(exc)
        return str(exc) if cause is None else str(cause.getMessage() or cause.toString())
    except Exception:
        return str(exc)


def _java_cause(exc: BaseException) -> Any | None:
    """The innermost Java cause of an error Py4J raised; None for any other error."""
    java = getattr(exc, "java_exception", None)
    if java is None or not str(exc).startswith("An error occurred while calling"):
        return None
    cause = java
    while cause.getCause() is not None and cause.getCause() != cause:
        cause = cause.getCause()
    return cause


def summary(exc: BaseException) -> str:
    """``Type: message`` for an error that is not ours, on one line. A Java exception
    reached through Py4J is named by its innermost cause: Py4J's own text is "An error
    occurred while calling o377.setCurrentSnapshot" followed by the whole Java stack, which
    filled a failed refresh's history row (the traceback keeps it, with ``--debug``)."""
    try:
        cause = _java_cause(exc)
        if cause is not None:
            kind = str(cause.getClass().getSimpleName())
            return f"{kind}: {first_line(str(cause.getMessage() or ''))}".rstrip(": ")
    except Exception:
        pass
    return f"{type(exc).__name__}: {exc}"


def _error_class(exc: BaseException) -> str:
    getter = getattr(exc, "getErrorClass", None)
    try:
        value = getter() if getter else None
    except Exception:
        value = None
    if value:
        return str(value)
    match = re.match(r"\s*\[([A-Z_]+)", str(exc))
    return match.group(1) if match else ""


def _quoted_name(message: str) -> str:
    match = re.search(r"`[^`]+`(?:\.`[^`]+`)*", message)
    return match.group(0).replace("`", "'") if match else "(unknown)"


# Iceberg's metadata tables; `t.snapshots` reads as table `snapshots` in schema `t`.
_METADATA_TABLES = frozenset(
    [
        "history",
        "metadata_log_entries",
        "snapshots",
        "entries",
        "files",
        "data_files",
        "delete_files",
        "manifests",
        "partitions",
        "position_deletes",
        "refs",
        "all_data_files",
        "all_delete_files",
        "all_entries",
        "all_files",
        "all_manifests",
    ]
)


def _metadata_table_hint(name: str) -> str:
    """Spark reads a two-part name as schema.table, so a table's metadata table or branch
    named from the current schema (`o.snapshots`, `o.branch_dev`) is not found; Iceberg
    finds it under the table's full name, which the message then spells out."""
    parts = [part.strip("'") for part in name.split("'.'")]
    if len(parts) != 2:
        return ""
    table, suffix = parts
    if suffix.lower() in _METADATA_TABLES or suffix.lower().startswith(("branch_", "tag_")):
        return (
            f"; a table's metadata tables, branches and tags are named with its schema "
            f"too, as in public.{table}.{suffix}"
        )
    return ""


def _clip(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
