"""Keeping what a dynamic table leaves behind bounded: its snapshots to the retention
period (and at most SNAPSHOTS_MAX of them), its state tables to the snapshot the next
refresh needs, its metadata files to a few.

Without this every refresh adds a snapshot to the table and one to each state table,
and a metadata file holding all of them: measured over 400 refreshes of a 7-row
aggregate, each commit's metadata file grew to 380 KB and the warehouse to 480 MB (the
metadata files grow linearly, so their sum grows with the square of the refreshes).

Runs after a refresh has committed, under its lease; nothing here can change what the
refresh published. Expiring also deletes the files only the expired snapshots used, as
the seeds say: after the retention period, history is no longer reachable by time
travel and is physically deleted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dyntables.catalog.definition import (
    DynamicTableDef,
    RefreshState,
    snapshot_of,
    table_name_of,
)
from dyntables.catalog.iceberg import IcebergTable, load_table
from dyntables.catalog.trash import DAY_MS
from dyntables.engine.jvm import java_class
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from dyntables.catalog.registry import Registry

ITERABLES = "org.apache.iceberg.relocated.com.google.common.collect.Iterables"

# Iceberg writes a new metadata file per commit; with these, it deletes all but the
# last few (time travel reads snapshots from the current file, never an old one)
METADATA_PROPERTIES: Mapping[str, str] = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}

# A table's snapshots are expired once its oldest is this much past the retention
# period: one expiry an hour instead of a commit per refresh
EXPIRE_SLACK_MS = 3_600_000

# Within the retention period a table keeps at most this many snapshots (plus the slack,
# so that expiry runs once per SNAPSHOTS_SLACK refreshes): every commit rewrites a
# metadata file listing all of them (~1 KB each), so a table refreshed every second
# would carry 86,400 for a day's retention and write ~80 MB per commit. A refresh a
# minute for a day (1,440) stays under it.
SNAPSHOTS_MAX = 2_000
SNAPSHOTS_SLACK = 100

# A state table is read only at the snapshot its table recorded; older ones are expired
# once there are more than this many
STATE_SNAPSHOTS_MAX = 16

# snapshots a refresh staged and never published are expired once there are this many
UNPUBLISHED_SLACK = 8


def metadata_properties_sql() -> str:
    """``'k'='v', ...`` for a CREATE TABLE's TBLPROPERTIES."""
    return ", ".join(f"'{k}'='{v}'" for k, v in METADATA_PROPERTIES.items())


def maintain(
    registry: Registry,
    dt: DynamicTableDef,
    table: IcebergTable,
    state: RefreshState,
    now_ms: int,
) -> dict[str, int]:
    """Expire what is due on the table and its state tables; returns the number of
    snapshots expired per table (only those where something was)."""
    spark = registry.spark
    expired: dict[str, int] = {}
    _ensure_metadata_cleanup(table)
    for info in state.state_tables.values():
        name, recorded = table_name_of(info), snapshot_of(info)
        state_table = load_table(spark, name)
        if state_table is None or recorded is None:
            continue
        _ensure_metadata_cleanup(state_table)
        count = _expire_state(state_table, recorded)
        if count:
            expired[str(name)] = count
        count = _expire_unpublished(state_table)
        if count:
            expired[str(name)] = expired.get(str(name), 0) + count
    count = _expire_table(registry, dt, table, now_ms) + _expire_unpublished(table)
    if count:
        expired[str(dt.name)] = count
    return expired


def _expire_unpublished(table: IcebergTable) -> int:
    """Snapshots staged under a ``wap.id`` that never became current (in no ancestry, ref
    or snapshot log): a refresh whose rewrite changed nothing (not published), one that
    failed or was killed. Under the table's lease no other refresh is staging, so none of
    them can still be published; kept, they (and their data files) stayed until the
    retention period, uncounted by SNAPSHOTS_MAX (which counts the main lineage), and
    without end on a table whose main lineage is a single snapshot (helper-24).

    Looked for once UNPUBLISHED_SLACK more snapshots exist than the main lineage's log
    lists (two py4j calls), since the search costs one call per snapshot."""
    if _snapshot_count(table) - int(table._t.history().size()) < UNPUBLISHED_SLACK:
        return 0
    util = java_class(table.spark, "org.apache.iceberg.util.SnapshotUtil")
    lineage = {int(i) for i in re.findall(r"-?\d+", str(util.currentAncestorIds(table._t)))}
    lineage |= {int(ref.snapshotId()) for ref in table._t.refs().values()}
    # once current, so published: a replaced query's refreshes are off the main lineage
    # but keep the retention period for time travel (helper-33)
    log = str(table._t.history().toString())
    lineage |= {int(i) for i in re.findall(r"snapshotId=(-?\d+)", log)}
    jlist = table._t.snapshots()
    snapshots = (jlist.get(i) for i in range(jlist.size()))
    staged = [
        snap_id
        for snap_id, snap in ((int(s.snapshotId()), s) for s in snapshots)
        if snap_id not in lineage and snap.summary().get("wap.id") is not None
    ]
    if not staged:
        return 0
    expire = table._t.expireSnapshots()
    for snapshot_id in staged:
        expire = expire.expireSnapshotId(snapshot_id)
    expire.commit()
    return len(staged)


def _ensure_metadata_cleanup(table: IcebergTable) -> None:
    """Tables made before these properties existed get them at their next refresh."""
    props = table.properties()
    if any(props.get(k) != v for k, v in METADATA_PROPERTIES.items()):
        table.set_properties(METADATA_PROPERTIES)


def _expire_state(table: IcebergTable, recorded: int) -> int:
    history = table._t.history()
    if history.size() <= STATE_SNAPSHOTS_MAX:
        return 0
    snapshot = table.snapshot(recorded)
    if snapshot is None or snapshot.snapshot_id != table.current_snapshot_id():
        return 0  # a refresh failed after writing it: the next one rolls it back first
    return _expire_older_than(table, snapshot.timestamp_ms)


def _expire_table(registry: Registry, dt: DynamicTableDef, table: IcebergTable, now_ms: int) -> int:
    history = table._t.history()
    size = int(history.size())
    if size <= 1:
        return 0
    cutoff = now_ms - dt.retention_days * DAY_MS
    if size > SNAPSHOTS_MAX + SNAPSHOTS_SLACK:
        # the newest SNAPSHOTS_MAX stay, whatever the retention period says
        cutoff = max(cutoff, int(history.get(size - SNAPSHOTS_MAX).timestampMillis()))
    elif int(history.get(0).timestampMillis()) >= cutoff - EXPIRE_SLACK_MS:
        return 0
    # a downstream dynamic table reads this one's changes from the snapshot it recorded:
    # that snapshot and every later one stay, whatever the retention period
    for recorded in _consumers_snapshots(registry, dt.name):
        snapshot = table.snapshot(recorded)
        if snapshot is not None:
            cutoff = min(cutoff, snapshot.timestamp_ms)
    return _expire_older_than(table, cutoff)


def _consumers_snapshots(registry: Registry, name: TableName) -> list[int]:
    key = str(name)
    out: list[int] = []
    for other in registry.all():
        if other.name == name or all(str(s) != key for s in other.sources):
            continue
        loaded = load_table(registry.spark, other.name)
        state = RefreshState.from_properties(loaded.properties()) if loaded else None
        version = state.sources.get(key) if state else None
        if version is not None and version.snapshot is not None:
            out.append(version.snapshot)
    return out


def _expire_older_than(table: IcebergTable, cutoff_ms: int) -> int:
    """Iceberg's own expiry (metadata on the driver, no Spark job): snapshots older than
    ``cutoff_ms`` but the current one go, with the files only they used."""
    before = _snapshot_count(table)
    table._t.expireSnapshots().expireOlderThan(cutoff_ms).retainLast(1).commit()
    return before - _snapshot_count(table)


def _snapshot_count(table: IcebergTable) -> int:
    return int(java_class(table.spark, ITERABLES).size(table._t.snapshots()))
