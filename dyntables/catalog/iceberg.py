"""Iceberg table metadata through the JVM (py4j): snapshots, properties, atomic publish.

Everything here reads or writes table *metadata* on the driver; no Spark job runs. That
is what makes a NO_DATA refresh cost a few metadata reads and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dyntables.engine.jvm import java_class
from dyntables.sql.tokens import TableName


class _Summary(Mapping[str, str]):
    """A snapshot summary read key by key: converting a whole Java map costs one py4j
    round trip per entry, and refreshes only ever need a few keys."""

    def __init__(self, jmap: Any) -> None:
        self._j = jmap
        self._cache: dict[str, str | None] = {}

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self._cache:
            value = self._j.get(key)
            self._cache[key] = None if value is None else str(value)
        value = self._cache[key]
        return default if value is None else value

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._j))

    def __len__(self) -> int:
        return int(self._j.size())


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    operation: str
    timestamp_ms: int
    summary: Mapping[str, str]

    @property
    def wap_id(self) -> str | None:
        return self.summary.get("wap.id")

    @property
    def adds_nothing(self) -> bool:
        """An append of no rows (Spark commits one for an INSERT of an empty result)."""
        return self.operation == "append" and int(self.summary.get("added-records", "0")) == 0


class IcebergTable:
    """A loaded Iceberg table (a fresh metadata read each time it is loaded)."""

    def __init__(self, spark: Any, name: TableName, jtable: Any) -> None:
        self.spark = spark
        self.name = name
        self._t = jtable
        self._properties: dict[str, str] | None = None

    @property
    def uuid(self) -> str:
        return str(self._t.uuid().toString())

    @property
    def location(self) -> str:
        return str(self._t.location())

    def properties(self) -> dict[str, str]:
        """All properties in one py4j round trip (as JSON), not one per entry; read once
        per loaded table (this object's own commits forget the copy)."""
        if self._properties is None:
            mapper = java_class(self.spark, "org.apache.iceberg.util.JsonUtil").mapper()
            self._properties = dict(json.loads(mapper.writeValueAsString(self._t.properties())))
        return dict(self._properties)

    def current_snapshot(self) -> SnapshotInfo | None:
        snap = self._t.currentSnapshot()
        return _snapshot(snap) if snap is not None else None

    def current_snapshot_id(self) -> int | None:
        snap = self._t.currentSnapshot()
        return int(snap.snapshotId()) if snap is not None else None

    def snapshot(self, snapshot_id: int) -> SnapshotInfo | None:
        snap = self._t.snapshot(snapshot_id)
        return _snapshot(snap) if snap is not None else None

    def snapshots(self) -> list[SnapshotInfo]:
        return [_snapshot(s) for s in self._t.snapshots()]

    def staged_snapshot(self, wap_id: str) -> SnapshotInfo | None:
        """The newest snapshot staged under ``wap_id`` (searched newest first: it is
        normally the last one, whatever the length of the table's history)."""
        jlist = self._t.snapshots()
        candidates = (jlist.get(i) for i in range(jlist.size() - 1, -1, -1))
        for snap in candidates:
            if snap.summary().get("wap.id") == wap_id:
                return _snapshot(snap)
        return None

    def ancestors_between(self, newer: int, older: int | None) -> list[SnapshotInfo] | None:
        """Snapshots after ``older`` up to and including ``newer``, oldest first.

        None when ``older`` is not an ancestor of ``newer`` (expired, rolled back, or the
        table was replaced): the caller must then recompute instead of reading changes.
        """
        chain: list[SnapshotInfo] = []
        current: int | None = newer
        while current is not None and current != older:
            snap = self.snapshot(current)
            if snap is None:
                return None
            chain.append(snap)
            current = snap.parent_id
        if current != older:
            return None
        chain.reverse()
        return chain

    def total_records(self) -> int | None:
        snap = self.current_snapshot()
        if snap is None:
            return 0
        value = snap.summary.get("total-records")
        return int(value) if value is not None else None

    # -- commits -------------------------------------------------------------------------
    def set_properties(self, props: Mapping[str, str], remove: Iterable[str] = ()) -> None:
        self._properties = None
        update = self._t.updateProperties()
        for key, value in props.items():
            update = update.set(key, value)
        for key in remove:
            update = update.remove(key)
        update.commit()

    def publish(self, snapshot_id: int | None, props: Mapping[str, str]) -> None:
        """Make ``snapshot_id`` current and set ``props`` in ONE metadata commit.

        This is the refresh's commit point: the data and the source snapshots it reflects
        become visible together or not at all.
        """
        self._properties = None
        txn = self._t.newTransaction()
        if snapshot_id is not None and snapshot_id != self.current_snapshot_id():
            txn.manageSnapshots().setCurrentSnapshot(snapshot_id).commit()
        update = txn.updateProperties()
        for key, value in props.items():
            update = update.set(key, value)
        update.commit()
        txn.commitTransaction()

    def rollback_to(self, snapshot_id: int) -> None:
        self._properties = None
        self._t.manageSnapshots().setCurrentSnapshot(snapshot_id).commit()


def _snapshot(snap: Any) -> SnapshotInfo:
    parent = snap.parentId()
    return SnapshotInfo(
        snapshot_id=int(snap.snapshotId()),
        parent_id=int(parent) if parent is not None else None,
        operation=str(snap.operation()),
        timestamp_ms=int(snap.timestampMillis()),
        summary=_Summary(snap.summary()),
    )


SPARK3_UTIL = "org.apache.iceberg.spark.Spark3Util"


def load_table(spark: Any, name: TableName) -> IcebergTable | None:
    """Load ``catalog.namespace.table``; None when it does not exist."""
    try:
        jtable = java_class(spark, SPARK3_UTIL).loadIcebergTable(spark._jsparkSession, str(name))
    except Exception as exc:  # py4j wraps NoSuchTableException / ValidationException
        text = str(exc)
        lowered = text.lower()
        if (
            "NoSuchTableException" in text
            or "not found" in lowered
            or "cannot be found" in lowered
            or "NoSuchNamespace" in text
        ):
            return None
        if "not an Iceberg table" in text or "Cannot use" in text:
            return None
        raise
    return IcebergTable(spark, name, jtable)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
