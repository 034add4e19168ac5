"""Iceberg table metadata through the JVM (py4j): snapshots, properties, atomic publish.

Everything here reads or writes table *metadata* on the driver; no Spark job runs. That
is what makes a NO_DATA refresh cost a few metadata reads and nothing else.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dyntables.catalog.definition import SourceVersion
from dyntables.engine.jvm import java_class
from dyntables.sql.tokens import TableName

# a commit's precondition (see IcebergTable.publish): the table's properties and current
# snapshot id as the commit finds them; it raises to stop the commit
CommitCheck = Callable[[Mapping[str, str], "int | None"], None]
# commits refused because another landed first, tried again on top of it (Iceberg's own
# default is 4 retries)
COMMIT_ATTEMPTS = 10


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
            self._properties = _properties(self.spark, self._t.properties())
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

    # -- data files (the change capture reads files, not versions) ---------------------------
    def net_file_changes(self, snapshot_ids: Iterable[int]) -> tuple[list[Any], list[Any]]:
        """The data files (Java ``DataFile``) these snapshots removed and added, netted: a
        file added and removed among them is in neither (its rows came and went). Files
        of ``replace`` snapshots (compaction) are left out: a replace moves rows between
        files without changing them, so the rows of its files are already counted where
        they were added or will be where they are removed. Only valid when no snapshot
        involved has delete files: a file's rows are then the file's records."""
        io = self._t.io()
        added: dict[str, Any] = {}
        removed: dict[str, Any] = {}
        for snapshot_id in snapshot_ids:
            snap = self._t.snapshot(snapshot_id)
            if str(snap.operation()) == "replace":
                continue
            for data_file in _java_list(self.spark, snap.removedDataFiles(io)):
                path = str(data_file.location())
                if added.pop(path, None) is None:
                    removed[path] = data_file
            for data_file in _java_list(self.spark, snap.addedDataFiles(io)):
                added[str(data_file.location())] = data_file
        return list(removed.values()), list(added.values())

    def file_tasks(self, data_files: list[Any]) -> list[Any]:
        """Scan tasks reading all of each data file (no deletes apply to them)."""
        no_deletes = self.spark.sparkContext._gateway.new_array(
            java_class(self.spark, "org.apache.iceberg.DeleteFile"), 0
        )
        schema_json = java_class(self.spark, "org.apache.iceberg.SchemaParser").toJson(
            self._t.schema()
        )
        always = java_class(self.spark, "org.apache.iceberg.expressions.Expressions").alwaysTrue()
        residual = java_class(
            self.spark, "org.apache.iceberg.expressions.ResidualEvaluator"
        ).unpartitioned(always)
        task = java_class(self.spark, "org.apache.iceberg.BaseFileScanTask")
        specs: dict[int, str] = {}
        out = []
        for data_file in data_files:
            spec_id = int(data_file.specId())
            if spec_id not in specs:
                spec = self._t.specs().get(spec_id)
                if spec is None:
                    raise LookupError(f"partition spec {spec_id} of {self.name} is gone")
                specs[spec_id] = java_class(
                    self.spark, "org.apache.iceberg.PartitionSpecParser"
                ).toJson(spec)
            out.append(task(data_file, no_deletes, schema_json, specs[spec_id], residual))
        return out

    def touched_partitions(self, snapshot_ids: Iterable[int]) -> Any | None:
        """An Iceberg row filter selecting the partitions in which these snapshots added or
        removed data or delete files: a delete file applies only to data files of its own
        partition, so no other partition's files read differently after them. ``replace``
        snapshots (compaction) are left out: a partition only they touched holds the same
        rows before and after. None when no such filter can be made (a file of an
        unpartitioned spec, whose equality deletes apply everywhere; a partition source
        column that was dropped)."""
        exprs = java_class(self.spark, "org.apache.iceberg.expressions.Expressions")
        any_value = java_class(self.spark, "java.lang.Object")._java_lang_class
        io = self._t.io()
        schema = self._t.schema()
        seen: set[tuple[int, str]] = set()
        row_filter = exprs.alwaysFalse()
        for snapshot_id in snapshot_ids:
            snap = self._t.snapshot(snapshot_id)
            if str(snap.operation()) == "replace":
                continue
            for files in (
                snap.addedDataFiles(io),
                snap.removedDataFiles(io),
                snap.addedDeleteFiles(io),
                snap.removedDeleteFiles(io),
            ):
                for content_file in _java_list(self.spark, files):
                    spec_id, partition = int(content_file.specId()), content_file.partition()
                    key = (spec_id, str(partition.toString()))
                    if key in seen:
                        continue
                    seen.add(key)
                    spec = self._t.specs().get(spec_id)
                    if spec is None or spec.isUnpartitioned():
                        return None
                    match = exprs.alwaysTrue()
                    fields = spec.fields()
                    live = [fields.get(i) for i in range(fields.size())]
                    sources = [f.sourceId() for f in live if not f.transform().isVoid()]
                    if len(set(sources)) < len(sources):
                        # two fields of one column (identity(k) and bucket(4, k)): Iceberg
                        # 1.10 projects one's predicate onto the other and plans no file
                        return None
                    for i, field in enumerate(live):
                        if field.transform().isVoid():
                            continue
                        source = schema.findColumnName(field.sourceId())
                        if source is None:
                            return None
                        term = exprs.transform(source, field.transform())
                        value = partition.get(i, any_value)
                        if value is None:
                            predicate = exprs.isNull(term)
                        elif isinstance(value, float) and math.isnan(value):
                            predicate = exprs.isNaN(term)  # no literal can be NaN
                        elif field.transform().isIdentity() and _timestamp_micros(
                            source_type := schema.findType(field.sourceId()), value
                        ):
                            predicate = self._micros_equal(exprs, source, source_type, value)
                        else:
                            predicate = exprs.equal(term, value)
                        match = getattr(exprs, "and")(match, predicate)
                    row_filter = getattr(exprs, "or")(row_filter, match)
        return row_filter

    def _micros_equal(self, exprs: Any, source: str, source_type: Any, value: int) -> Any:
        """``source = value`` for a timestamp partition value (microseconds). py4j hands
        a whole number back as an Integer when it fits in 32 bits, and Iceberg converts
        no Integer to a timestamp: a timestamp within 36 minutes of 1970-01-01 (UTC)
        failed the capture (FULL, SOURCE_HISTORY_UNAVAILABLE). A Long converts."""
        literal = java_class(self.spark, "org.apache.iceberg.expressions.Literal").of(value)
        long_type = java_class(self.spark, "org.apache.iceberg.types.Types$LongType").get()
        typed = literal.to(long_type).to(source_type)
        operation = java_class(self.spark, "org.apache.iceberg.expressions.Expression$Operation")
        return exprs.predicate(operation.EQ, source, typed)

    def scan_tasks(
        self, snapshot_id: int, row_filter: Any | None = None
    ) -> dict[tuple[str, frozenset[str]], Any]:
        """Every data file of a snapshot (in the partitions ``row_filter`` selects) as the
        scan task that reads it then, keyed by the file and the delete files applying to
        it: two snapshots' tasks with one key read the same rows."""
        scan = self._t.newScan().useSnapshot(snapshot_id)
        if row_filter is not None:
            scan = scan.filter(row_filter)
        tasks = scan.planFiles()
        try:
            planned = _java_list(self.spark, tasks)
        finally:
            tasks.close()
        out: dict[tuple[str, frozenset[str]], Any] = {}
        for task in planned:
            deletes = task.deletes()
            key = (
                str(task.file().location()),
                frozenset(str(deletes.get(i).location()) for i in range(deletes.size())),
            )
            out[key] = task
        return out

    def partition_fields(self) -> list[tuple[str, str]] | None:
        """(source column, transform) of each field of the table's partition spec, as
        Iceberg names them (``day``, ``identity``, ``bucket[16]``...); None when the
        table has had more than one spec: a filter aligned with the current spec's
        partitions may cut through the files an older spec wrote."""
        if self._t.specs().size() != 1:
            return None
        schema = self._t.schema()
        fields = self._t.spec().fields()
        out = []
        for i in range(fields.size()):
            field = fields.get(i)
            if field.transform().isVoid():
                continue
            source = schema.findColumnName(field.sourceId())
            if source is None:
                return None
            out.append((str(source), str(field.transform().toString())))
        return out

    def count_files(self, column: str, transform: str, values: Iterable[int | None]) -> int:
        """How many data files of the current snapshot lie in the partitions whose
        ``transform`` of ``column`` is one of ``values`` (None: the NULL partition); one
        planning pass over the manifests, the files counted on the JVM side."""
        exprs = java_class(self.spark, "org.apache.iceberg.expressions.Expressions")
        transforms = java_class(self.spark, "org.apache.iceberg.transforms.Transforms")
        term = exprs.transform(column, transforms.fromString(transform))
        row_filter = exprs.alwaysFalse()
        for value in values:
            predicate = exprs.isNull(term) if value is None else exprs.equal(term, value)
            row_filter = getattr(exprs, "or")(row_filter, predicate)
        tasks = self._t.newScan().filter(row_filter).planFiles()
        try:
            iterables = java_class(
                self.spark, "org.apache.iceberg.relocated.com.google.common.collect.Iterables"
            )
            return int(iterables.size(tasks))
        finally:
            tasks.close()

    def loads_itself(self) -> bool:
        """Whether Iceberg loaded the table named, and not another under its name:
        ``public.t.branch_b`` loads ``t`` (at branch b)."""
        return str(self._t.name()).lower().endswith(self.name.parts[-1].lower())

    @property
    def is_metadata_table(self) -> bool:
        """``t.snapshots``, ``t.files``, ...: Iceberg loads them under a three-part name."""
        cls = self._t.getClass()
        while cls is not None:
            if cls.getName() == "org.apache.iceberg.BaseMetadataTable":
                return True
            cls = cls.getSuperclass()
        return False

    def version(self, refs: Iterable[str] = ()) -> SourceVersion:
        """The table as a refresh reads it now: its current snapshot, and the snapshot
        of each of ``refs`` (branches or tags; None for one the table lacks)."""
        jrefs = self._t.refs() if refs else None
        found = []
        for name in sorted(set(refs)):
            ref = jrefs.get(name) if jrefs is not None else None
            found.append((name, int(ref.snapshotId()) if ref is not None else None))
        return SourceVersion(self.current_snapshot_id(), self.uuid, tuple(found))

    def types_ever(self, names: Iterable[str]) -> dict[str, set[str]]:
        """Each named column's types in every schema the table has had (by name, so a
        column dropped and added again counts as one)."""
        schemas = _java_list(self.spark, self._t.schemas().values())
        found: dict[str, set[str]] = {}
        for name in names:
            fields = (s.caseInsensitiveFindField(name) for s in schemas)
            found[name] = {str(f.type().toString()) for f in fields if f is not None}
        return found

    def column_names(self) -> list[str]:
        """The top-level column names of the current schema."""
        columns = self._t.schema().columns()
        return [str(columns.get(i).name()) for i in range(columns.size())]

    def total_records(self) -> int | None:
        snap = self.current_snapshot()
        if snap is None:
            return 0
        value = snap.summary.get("total-records")
        return int(value) if value is not None else None

    # -- commits -------------------------------------------------------------------------
    def set_properties(
        self,
        props: Mapping[str, str],
        remove: Iterable[str] = (),
        check: CommitCheck | None = None,
    ) -> None:
        """Set ``props`` and remove ``remove``, the other properties as they are when the
        commit lands; ``check``: see :meth:`publish`."""
        self._commit(None, props, tuple(remove), check)

    def publish(
        self, snapshot_id: int | None, props: Mapping[str, str], check: CommitCheck | None = None
    ) -> None:
        """Make ``snapshot_id`` current and set ``props`` in ONE metadata commit.

        This is the refresh's commit point: the data and the source snapshots it reflects
        become visible together or not at all. ``check`` is asked of the table as the
        commit finds it (its properties and current snapshot, this object showing that
        metadata meanwhile) and raises to commit nothing. Iceberg's own transaction
        re-applies a change on top of whatever another writer committed meanwhile, checking
        nothing: a refresh published the rows of a query that a CREATE OR REPLACE had
        just replaced (helper-32).
        """
        self._commit(snapshot_id, props, (), check)

    def _commit(
        self,
        snapshot_id: int | None,
        props: Mapping[str, str],
        remove: tuple[str, ...],
        check: CommitCheck | None,
    ) -> None:
        """One compare-and-swap of the table's metadata, from the metadata as it is now:
        Iceberg refuses it if another commit landed since, and it is tried again on top
        of that one, checked again."""
        self._properties = None
        ops = self._t.operations()
        builder_class = java_class(self.spark, "org.apache.iceberg.TableMetadata")
        jprops = java_class(self.spark, "java.util.HashMap")()
        for key, value in props.items():
            jprops.put(key, value)
        jremove = java_class(self.spark, "java.util.HashSet")()
        for key in remove:
            jremove.add(key)
        for attempt in range(COMMIT_ATTEMPTS):
            base = refreshed(ops)
            current = base.currentSnapshot()
            current_id = int(current.snapshotId()) if current is not None else None
            if check is not None:
                check(_properties(self.spark, base.properties()), current_id)
            builder = builder_class.buildFrom(base)
            if snapshot_id is not None and snapshot_id != current_id:
                builder.setBranchSnapshot(snapshot_id, "main")
            if props:
                builder.setProperties(jprops)
            if remove:
                builder.removeProperties(jremove)
            try:
                ops.commit(base, builder.build())
                return
            except Exception as exc:
                if not _commit_failed(exc) or attempt == COMMIT_ATTEMPTS - 1:
                    raise
            time.sleep(min(1.0, 0.05 * 2**attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def rollback_to(self, snapshot_id: int) -> None:
        self._properties = None
        self._t.manageSnapshots().setCurrentSnapshot(snapshot_id).commit()


def _properties(spark: Any, jmap: Any) -> dict[str, str]:
    """A Java map of properties in one py4j round trip (as JSON), not one per entry."""
    mapper = java_class(spark, "org.apache.iceberg.util.JsonUtil").mapper()
    return dict(json.loads(mapper.writeValueAsString(jmap)))


def refreshed(ops: Any) -> Any:
    """``ops.refresh()``, read again when a Hadoop catalog's version hint named a
    metadata file that another process's commit deleted in between (``previous-versions-
    max``): 3 in 1,214 ALTERs from two processes failed so (helper-33)."""
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            return ops.refresh()
        except Exception as exc:
            if "Metadata file for version" not in str(exc) or attempt == COMMIT_ATTEMPTS - 1:
                raise
        time.sleep(0.05)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _commit_failed(exc: BaseException) -> bool:
    """Whether Iceberg refused a commit because another one landed first."""
    java = getattr(exc, "java_exception", None)
    return java is not None and "CommitFailedException" in str(java.getClass().getName())


def _snapshot(snap: Any) -> SnapshotInfo:
    parent = snap.parentId()
    return SnapshotInfo(
        snapshot_id=int(snap.snapshotId()),
        parent_id=int(parent) if parent is not None else None,
        operation=str(snap.operation()),
        timestamp_ms=int(snap.timestampMillis()),
        summary=_Summary(snap.summary()),
    )


def _timestamp_micros(source_type: Any, value: object) -> bool:
    """Whether an identity partition value is a timestamp's microseconds."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and str(source_type.toString()).startswith("timestamp")
    )


def _java_list(spark: Any, iterable: Any) -> list[Any]:
    """A Java ``Iterable``'s elements, fetched by index: py4j's own iteration ends in a
    Java exception that PySpark converts (~15 ms)."""
    jlist = java_class(
        spark, "org.apache.iceberg.relocated.com.google.common.collect.Lists"
    ).newArrayList(iterable)
    return [jlist.get(i) for i in range(jlist.size())]


SPARK3_UTIL = "org.apache.iceberg.spark.Spark3Util"


def caches_tables(spark: Any, catalog: str) -> bool:
    """Whether ``catalog`` hands out its tables' metadata as it was when first loaded
    (Iceberg's ``cache-enabled``, on unless set off): a commit made through another
    object is not seen until the cache expires."""
    return (
        str(spark.conf.get(f"spark.sql.catalog.{catalog}.cache-enabled", "true")).lower() != "false"
    )


@contextmanager
def active_session(spark: Any) -> Iterator[None]:
    """``spark`` as the JVM thread's active session while Iceberg resolves a name: Spark
    sets a catalog up from the settings of the thread's active session, and a Python
    thread other than the one that built the session has none (helper-30). There a
    catalog not yet used by ``spark`` (another catalog's source, or a clone's first
    read) was unknown, and Iceberg read its name as a namespace of ``spark_catalog``:
    a scheduled refresh of a table over another catalog failed. A clone's catalogs are
    also set up under its own settings so (its cache turned off)."""
    session = java_class(spark, "org.apache.spark.sql.SparkSession")
    before = session.getActiveSession()
    session.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if before.isDefined():
            session.setActiveSession(before.get())
        else:
            session.clearActiveSession()


def load_table(spark: Any, name: TableName) -> IcebergTable | None:
    """Load ``catalog.namespace.table``, as its metadata is now; None when it does not
    exist. From a caching catalog the table is refreshed: else a refresh did not find
    the write it had just staged, and published its state without it."""
    try:
        with active_session(spark):
            jtable = java_class(spark, SPARK3_UTIL).loadIcebergTable(
                spark._jsparkSession, name.sql()
            )
        if caches_tables(spark, name.parts[0]):
            jtable.refresh()
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


def drop_state_tables(spark: Any, tables: list[str]) -> None:
    """Drop aggregate state tables, best effort: an orphan costs disk, never
    correctness."""
    for name in tables:
        try:
            spark.sql(f"DROP TABLE IF EXISTS {TableName(tuple(name.split('.'))).sql()} PURGE")
        except Exception:
            pass
