"""A dynamic table's definition and refresh state, stored in its own table properties.

Keeping both in the Iceberg table's metadata makes the table self-describing and lets
one metadata commit publish data, definition and the source snapshots it reflects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from dyntables.sql.tokens import TableName

PREFIX = "dyntables."
KIND = "dynamic_table"
ACTIVE = "ACTIVE"
SUSPENDED = "SUSPENDED"
DEFAULT_RETENTION_DAYS = 1
# session settings a query's result depends on: recorded at CREATE and set for every
# refresh, so rows computed later agree with those computed before (hour(ts) of a
# TIMESTAMP depends on the time zone, a cast of 'x' to INT on ANSI mode, what
# CAST(x AS TIMESTAMP) and TIMESTAMP '...' make on the default timestamp type)
RESULT_SETTINGS = (
    "spark.sql.session.timeZone",
    "spark.sql.ansi.enabled",
    "spark.sql.timestampType",
)
# the other settings a result, or how Spark reads SQL text, can depend on: Spark's
# legacy behaviours (size(NULL), stddev of one row, date patterns, ...), ANSI's
# variants, decimal precision, case sensitivity, map key deduplication. They are
# recorded at CREATE when the creating session set them, and unset for a refresh when
# it did not, so a session that refreshes with others set computes as CREATE did.
RESULT_SETTING_PREFIXES = ("spark.sql.legacy.", "spark.sql.ansi.")
RESULT_SETTING_KEYS = frozenset(
    {
        "spark.sql.caseSensitive",
        "spark.sql.charAsVarchar",
        "spark.sql.chunkBase64String.enabled",
        "spark.sql.decimalOperations.allowPrecisionLoss",
        "spark.sql.function.concatBinaryAsString",
        "spark.sql.function.eltOutputAsString",
        "spark.sql.groupByAliases",
        "spark.sql.groupByOrdinal",
        "spark.sql.jsonGenerator.ignoreNullFields",
        "spark.sql.mapKeyDedupPolicy",
        "spark.sql.orderByOrdinal",
        "spark.sql.parser.escapedStringLiterals",
        "spark.sql.parser.quotedRegexColumnNames",
        "spark.sql.readSideCharPadding",
        "spark.sql.storeAssignmentPolicy",
    }
)


def changes_results(key: str) -> bool:
    """Whether session setting ``key`` can change what a query returns or how its text
    reads (see RESULT_SETTING_PREFIXES)."""
    return (
        key in RESULT_SETTINGS
        or key in RESULT_SETTING_KEYS
        or key.startswith(RESULT_SETTING_PREFIXES)
    )


@dataclass(frozen=True)
class SourceVersion:
    """What a refresh read from one source: the snapshot (None: table was empty) and the
    table's uuid, so a dropped-and-recreated source is not mistaken for the same table.
    ``refs``: the snapshot of each branch or tag the query reads by name (``VERSION AS
    OF 'b'``), sorted by name; a ref moves without a commit to the table's main history,
    so without them a moved ref looked like no change."""

    snapshot: int | None
    uuid: str
    refs: tuple[tuple[str, int | None], ...] = ()

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"snapshot": self.snapshot, "uuid": self.uuid}
        if self.refs:
            out["refs"] = [[name, snap] for name, snap in self.refs]
        return out

    @staticmethod
    def from_json(value: Mapping[str, object]) -> SourceVersion:
        snap = value.get("snapshot")
        refs = value.get("refs") or []
        assert isinstance(refs, list)
        return SourceVersion(
            int(str(snap)) if snap is not None else None,
            str(value.get("uuid", "")),
            tuple((str(n), int(str(s)) if s is not None else None) for n, s in refs),
        )


@dataclass(frozen=True)
class RefreshState:
    """The committed result of the last successful refresh. ``table_snapshot``: the
    table's own snapshot that refresh made current (None: not known, as after CREATE's
    CTAS), so a table rolled back or written outside dyntables is noticed."""

    refresh_id: str
    time_ms: int
    sources: Mapping[str, SourceVersion]
    mode: str
    state_tables: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    table_snapshot: int | None = None
    # the day its query read as CURRENT_DATE (None: it reads none)
    day: str | None = None

    def to_properties(self) -> dict[str, str]:
        return {
            # always set ("" when unknown): a table replaced in place keeps old properties
            PREFIX + "refresh.table_snapshot": str(self.table_snapshot or ""),
            PREFIX + "refresh.day": self.day or "",
            PREFIX + "refresh.id": self.refresh_id,
            PREFIX + "refresh.time_ms": str(self.time_ms),
            PREFIX + "refresh.mode": self.mode,
            PREFIX + "refresh.sources": json.dumps(
                {k: v.to_json() for k, v in sorted(self.sources.items())}, separators=(",", ":")
            ),
            PREFIX + "refresh.state_tables": json.dumps(
                dict(self.state_tables), separators=(",", ":")
            ),
        }

    @staticmethod
    def from_properties(props: Mapping[str, str]) -> RefreshState | None:
        if PREFIX + "refresh.id" not in props:
            return None
        sources = json.loads(props.get(PREFIX + "refresh.sources", "{}"))
        return RefreshState(
            refresh_id=props[PREFIX + "refresh.id"],
            time_ms=int(props.get(PREFIX + "refresh.time_ms", "0")),
            mode=props.get(PREFIX + "refresh.mode", ""),
            sources={k: SourceVersion.from_json(v) for k, v in sources.items()},
            state_tables=json.loads(props.get(PREFIX + "refresh.state_tables", "{}")),
            table_snapshot=_int_or_none(props.get(PREFIX + "refresh.table_snapshot")),
            day=props.get(PREFIX + "refresh.day") or None,
        )


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value else None


def table_name_of(info: Mapping[str, object]) -> TableName:
    """The table of a state entry ({"table": name, "snapshot": id})."""
    return TableName(tuple(str(info["table"]).split(".")))


def snapshot_of(info: Mapping[str, object]) -> int | None:
    value = info.get("snapshot")
    return None if value is None else int(str(value))


@dataclass(frozen=True)
class DynamicTableDef:
    name: TableName  # catalog.namespace.table
    dt_id: str
    query: str
    sources: tuple[TableName, ...]
    interval_seconds: int | None = None
    refresh_mode: str = "AUTO"
    vcluster: str = "DEFAULT"
    state: str = ACTIVE
    suspended_reason: str | None = None
    created_ms: int = 0
    retention_days: int = DEFAULT_RETENTION_DAYS
    comment: str | None = None
    partitioned_by: tuple[str, ...] = ()
    user_properties: Mapping[str, str] = field(default_factory=dict)
    # RESULT_SETTINGS as the creating session had them, and every other setting that
    # changes_results it had set (empty: created before they were recorded; such a
    # table refreshes with the refreshing session's)
    settings: Mapping[str, str] = field(default_factory=dict)
    # whether ``settings`` holds every setting that changes_results the creating session
    # had set, so a refresh unsets the others (False: created before they were all
    # recorded; only RESULT_SETTINGS are set)
    settings_whole: bool = False
    # the names of the query's columns at CREATE, as Spark resolved them and as the
    # compiler did (they may differ, e.g. a pivot over -1): a refresh whose ``*`` now
    # expands otherwise would write other columns by position (empty: created before
    # they were recorded)
    query_columns: tuple[str, ...] = ()
    plan_columns: tuple[str, ...] = ()
    # the catalog and namespace the query's names were resolved in at CREATE (the
    # creating session's, as a Spark view keeps them; empty: created before they were
    # recorded, resolved in the table's own)
    query_namespace: tuple[str, ...] = ()

    @property
    def catalog(self) -> str:
        return self.name.parts[0]

    @property
    def schema(self) -> str:
        return self.name.parts[1]

    @property
    def table(self) -> str:
        return self.name.parts[2]

    def with_options(self, **changes: object) -> DynamicTableDef:
        return replace(self, **changes)  # type: ignore[arg-type]

    def properties_changed(self, before: DynamicTableDef) -> dict[str, str]:
        """The properties in which this definition differs from ``before``, to be written
        alone: written whole, an ALTER put back the query it had read over the one a
        CREATE OR REPLACE had committed meanwhile (helper-32)."""
        old = before.to_properties()
        return {k: v for k, v in self.to_properties().items() if old.get(k) != v}

    def to_properties(self) -> dict[str, str]:
        props = {
            PREFIX + "kind": KIND,
            PREFIX + "dt_id": self.dt_id,
            PREFIX + "query": self.query,
            PREFIX + "sources": json.dumps([str(s) for s in self.sources]),
            PREFIX + "interval_seconds": ""
            if self.interval_seconds is None
            else str(self.interval_seconds),
            PREFIX + "refresh_mode": self.refresh_mode,
            PREFIX + "vcluster": self.vcluster,
            PREFIX + "state": self.state,
            PREFIX + "suspended_reason": self.suspended_reason or "",
            PREFIX + "created_ms": str(self.created_ms),
            PREFIX + "retention_days": str(self.retention_days),
            PREFIX + "partitioned_by": json.dumps(list(self.partitioned_by)),
            PREFIX + "user_properties": json.dumps(dict(self.user_properties), sort_keys=True),
            PREFIX + "settings": json.dumps(dict(self.settings), sort_keys=True),
            PREFIX + "settings_whole": "true" if self.settings_whole else "",
            PREFIX + "query_columns": json.dumps(list(self.query_columns)),
            PREFIX + "plan_columns": json.dumps(list(self.plan_columns)),
            PREFIX + "query_namespace": json.dumps(list(self.query_namespace)),
        }
        return props

    @staticmethod
    def from_properties(name: TableName, props: Mapping[str, str]) -> DynamicTableDef | None:
        if props.get(PREFIX + "kind") != KIND:
            return None
        interval = props.get(PREFIX + "interval_seconds", "")
        return DynamicTableDef(
            name=name,
            dt_id=props.get(PREFIX + "dt_id", ""),
            query=props.get(PREFIX + "query", ""),
            sources=tuple(
                TableName(tuple(s.split(".")))
                for s in json.loads(props.get(PREFIX + "sources", "[]"))
            ),
            interval_seconds=int(interval) if interval else None,
            refresh_mode=props.get(PREFIX + "refresh_mode", "AUTO"),
            vcluster=props.get(PREFIX + "vcluster", "DEFAULT"),
            state=props.get(PREFIX + "state", ACTIVE),
            suspended_reason=props.get(PREFIX + "suspended_reason") or None,
            created_ms=int(props.get(PREFIX + "created_ms", "0") or 0),
            retention_days=int(props.get(PREFIX + "retention_days", str(DEFAULT_RETENTION_DAYS))),
            comment=props.get("comment"),
            partitioned_by=tuple(json.loads(props.get(PREFIX + "partitioned_by", "[]"))),
            user_properties=json.loads(props.get(PREFIX + "user_properties", "{}")),
            settings=json.loads(props.get(PREFIX + "settings", "{}")),
            settings_whole=props.get(PREFIX + "settings_whole") == "true",
            query_columns=tuple(json.loads(props.get(PREFIX + "query_columns", "[]"))),
            plan_columns=tuple(json.loads(props.get(PREFIX + "plan_columns", "[]"))),
            query_namespace=tuple(json.loads(props.get(PREFIX + "query_namespace", "[]"))),
        )
