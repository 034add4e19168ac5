"""Loading a table from a Python thread other than the one that built the session, as
the scheduler's refresh threads do (helper-30): Spark sets a catalog up from the
settings of the JVM thread's active session, which such a thread lacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.sql.tokens import TableName


def test_a_catalog_first_used_from_another_thread_is_found(
    lh: Lakehouse, unique: Callable[[str], str], tmp_path: Path
) -> None:
    catalog = unique("other")
    settings = {
        f"spark.sql.catalog.{catalog}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{catalog}.type": "hadoop",
        f"spark.sql.catalog.{catalog}.warehouse": str(tmp_path),
    }
    writer = lh.spark.newSession()  # the table is made without using the catalog in lh
    for key, value in settings.items():
        writer.conf.set(key, value)
        lh.spark.conf.set(key, value)
    writer.sql(f"CREATE TABLE {catalog}.db.s (k INT) USING iceberg")
    found: list[object] = []
    thread = threading.Thread(
        target=lambda: found.append(load_table(lh.spark, TableName((catalog, "db", "s"))))
    )
    thread.start()
    thread.join()
    assert found and found[0] is not None, found
