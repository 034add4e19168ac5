"""Writes to Iceberg tables that Spark cannot make, for tests: equality deletes, as
Flink's upsert sink deletes by key (the seeds' Flink article)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table


def equality_delete(
    lh: Lakehouse,
    name: str,
    column: str,
    values: Sequence[int | None],
    within: Mapping[str, int] | None = None,
) -> None:
    """Commit equality delete files for the rows whose INT ``column`` is one of ``values``
    (None: NULL, which an equality delete matches), one file per partition of the
    table's current spec the values fall in, in one commit; written with Iceberg's own
    writer through the JVM. ``within``: the values of other (INT) columns the spec
    partitions by (a delete applies only to its partition's rows)."""
    spark = lh.spark
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    table = load_table(spark, lh.qualify(name))
    assert table is not None, name
    jtable = table._t
    schema, spec = jtable.schema(), jtable.spec()
    names = gateway.new_array(jvm.String, 1)
    names[0] = column
    key_schema = schema.select(names)
    ids = gateway.new_array(jvm.int, 1)
    ids[0] = schema.findField(column).fieldId()
    data = jvm.org.apache.iceberg.data
    factory = data.GenericAppenderFactory(schema, spec, ids, key_schema, None)
    # the partition of each value: a row of the table's schema holding only the value
    by_partition: dict[str, tuple[object, list[int | None]]] = {}
    wrapper = data.InternalRecordWrapper(schema.asStruct())
    for value in values:
        partition = None
        if not spec.isUnpartitioned():
            row = data.GenericRecord.create(schema)
            row.setField(column, value)
            for other, fixed in (within or {}).items():
                row.setField(other, fixed)
            partition = jvm.org.apache.iceberg.PartitionKey(spec, schema)
            partition.partition(wrapper.wrap(row))
        key = str(partition.toString()) if partition is not None else ""
        by_partition.setdefault(key, (partition, []))[1].append(value)
    delta = jtable.newRowDelta()
    for partition, part_values in by_partition.values():
        path = jtable.locationProvider().newDataLocation(f"eq-delete-{uuid.uuid4().hex}.parquet")
        out = jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
            jtable.io().newOutputFile(path)
        )
        writer = factory.newEqDeleteWriter(
            out, jvm.org.apache.iceberg.FileFormat.PARQUET, partition
        )
        for value in part_values:
            record = data.GenericRecord.create(key_schema)
            record.setField(column, value)
            writer.write(record)
        writer.close()
        delta.addDeletes(writer.toDeleteFile())
    delta.commit()
