"""Our statements as frozen data. Parsing builds them; the facade executes them."""

from __future__ import annotations

from dataclasses import dataclass, field

from dyntables.sql.tokens import TableName

REFRESH_MODES = ("AUTO", "INCREMENTAL", "FULL")
_UNIT_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}


def interval_seconds(amount: int, unit: str) -> int:
    return amount * _UNIT_SECONDS[unit.upper().rstrip("S")]


# ALTER TABLE ... CREATE | REPLACE | DROP TAG: names a snapshot, changes no row; allowed
# on a dynamic table (a tag keeps a refresh's result for audits or time travel)
ALTER_TAG = "ALTER TAG"


@dataclass(frozen=True)
class Statement:
    text: str


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    comment: str | None = None


@dataclass(frozen=True)
class CreateDynamicTable(Statement):
    name: TableName
    query: str
    or_replace: bool = False
    if_not_exists: bool = False
    columns: tuple[ColumnSpec, ...] = ()
    partitioned_by: tuple[str, ...] = ()
    comment: str | None = None
    interval_seconds: int | None = None
    refresh_mode: str = "AUTO"
    vcluster: str = "DEFAULT"
    properties: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RefreshDynamicTable(Statement):
    name: TableName
    full: bool = False  # REFRESH ... FULL: recompute whatever changed (history: FORCED_FULL)


@dataclass(frozen=True)
class ShowDynamicTables(Statement):
    like: str | None = None
    namespace: TableName | None = None  # IN / FROM [catalog.]namespace; None: the current


@dataclass(frozen=True)
class DescribeDynamicTable(Statement):
    name: TableName
    extended: bool = False


@dataclass(frozen=True)
class ShowRefreshHistory(Statement):
    where: str | None = None
    limit: int | None = None


@dataclass(frozen=True)
class DropDynamicTable(Statement):
    name: TableName
    if_exists: bool = False


@dataclass(frozen=True)
class UndropTable(Statement):
    name: TableName


@dataclass(frozen=True)
class AlterDynamicTable(Statement):
    """ALTER DYNAMIC TABLE name SUSPEND | RESUME | SET <option> ..."""

    name: TableName
    action: str  # SUSPEND | RESUME | SET
    interval_seconds: int | None = None
    vcluster: str | None = None
    refresh_mode: str | None = None
    clear_interval: bool = False


@dataclass(frozen=True)
class SetTableProperties(Statement):
    """The seeds' ALTER TABLE name SET PROPERTIES (...) (Spark spells it TBLPROPERTIES)."""

    name: TableName
    properties: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ExplainDynamicTable(Statement):
    name: TableName


@dataclass(frozen=True)
class SparkStatement(Statement):
    """Anything that is not ours: runs on Spark SQL unchanged.

    ``writes`` is the table a DML/DDL statement would modify, so the facade can refuse
    it when that table is a dynamic table; ``verb`` says what kind of change it is.
    """

    verb: str | None = None
    writes: TableName | None = None
    # further tables one statement writes (Hive's FROM ... INSERT ... INSERT ...)
    also_writes: tuple[TableName, ...] = ()
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
