"""One error root with stable codes.

Every error a user can cause is a :class:`DynTablesError` whose ``code`` never changes
between releases (scripts and tests match on it) and whose message names the object
and says what to do. The CLI prints ``error [CODE]: message`` on one line.
"""

from __future__ import annotations


class DynTablesError(Exception):
    """Root of every error dyntables raises on purpose."""

    code = "DT_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def one_line(self) -> str:
        return f"error [{self.code}]: {' '.join(self.message.split())}"


class JavaNotFoundError(DynTablesError):
    code = "JAVA_NOT_FOUND"


class WarehouseError(DynTablesError):
    code = "WAREHOUSE_UNUSABLE"


class ConfigError(DynTablesError):
    code = "CONFIG_INVALID"


class SqlSyntaxError(DynTablesError):
    code = "SQL_SYNTAX"


class TableNotFoundError(DynTablesError):
    code = "TABLE_NOT_FOUND"


class TableExistsError(DynTablesError):
    code = "TABLE_EXISTS"


class AnalysisError(DynTablesError):
    """Spark rejected a statement at analysis time (bad column, type mismatch, ...)."""

    code = "SQL_ANALYSIS"


class ExecutionError(DynTablesError):
    """Spark failed while running a statement."""

    code = "SQL_EXECUTION"


class DynamicTableDmlError(DynTablesError):
    code = "DT_READ_ONLY"


class UseDropDynamicTableError(DynTablesError):
    code = "DT_USE_DROP_DYNAMIC_TABLE"


class NotADynamicTableError(DynTablesError):
    code = "NOT_A_DYNAMIC_TABLE"


class NonDeterministicQueryError(DynTablesError):
    code = "DT_NON_DETERMINISTIC"


class UnsupportedQueryError(DynTablesError):
    """The query cannot be a dynamic table at all (e.g. it is not a SELECT)."""

    code = "DT_UNSUPPORTED_QUERY"


class IncrementalNotSupportedError(DynTablesError):
    """REFRESH_MODE = INCREMENTAL was requested for a query the compiler cannot maintain."""

    code = "DT_INCREMENTAL_NOT_SUPPORTED"


class InvalidOptionError(DynTablesError):
    code = "DT_INVALID_OPTION"


class RefreshFailedError(DynTablesError):
    code = "DT_REFRESH_FAILED"
    # set when the failure suspended the table (the scheduler's last allowed failure)
    suspended_reason: str | None = None


class RefreshConflictError(DynTablesError):
    """Another refresh of the same table holds its lock."""

    code = "DT_REFRESH_IN_PROGRESS"


class ChangedMeanwhileError(DynTablesError):
    """A statement found the dynamic table other than it read it: dropped, recreated or
    replaced by another statement while this one ran."""

    code = "DT_CHANGED_MEANWHILE"


class UndropError(DynTablesError):
    code = "DT_UNDROP"


class QueryColumnsChangedError(DynTablesError):
    """The query's columns no longer are the table's (a source's columns changed under
    ``SELECT *``): writing its rows by position would put values under other columns."""

    code = "DT_QUERY_COLUMNS_CHANGED"


class SourceSchemaChangedError(DynTablesError):
    """The query no longer analyzes over its sources' current columns (one was renamed,
    dropped or retyped since CREATE)."""

    code = "DT_SOURCE_SCHEMA_CHANGED"
