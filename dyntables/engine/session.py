"""The only place that builds Spark sessions.

Embedded default: ``local[*]`` with an Iceberg Hadoop catalog in a warehouse folder.
Everything here is a setting the user can override (``dyntables.toml`` or ``--conf``),
so the same code points at a cluster and another Iceberg catalog type.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dyntables.engine.jars import iceberg_runtime_jar
from dyntables.engine.java import check_java
from dyntables.errors import WarehouseError

DEFAULT_CATALOG = "lakehouse"
DEFAULT_NAMESPACE = "public"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
# the JVMs' options: a setting that replaces them should start with these
JAVA_OPTIONS = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"

# Tables we create default to copy-on-write (Iceberg's own default, said explicitly):
# readers never merge delete files, and a change is captured from the files it rewrote
# alone, without planning both snapshots (merge-on-read sources work too, see
# refresh/changes.py).
TABLE_DEFAULTS = {
    "format-version": "2",
    "write.delete.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
}


def prepare_warehouse(path: str | os.PathLike[str]) -> Path:
    """Create the warehouse folder if needed and prove it is writable."""
    warehouse = Path(path).expanduser().resolve()
    created = not warehouse.exists()
    try:
        warehouse.mkdir(parents=True, exist_ok=True)
        probe = warehouse / f".write-probe-{uuid.uuid4().hex}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        if created and warehouse.exists():
            with contextlib.suppress(OSError):
                warehouse.rmdir()
        raise WarehouseError(
            f"warehouse folder {warehouse} is not usable ({exc.strerror or exc}); "
            "pick a writable folder with --warehouse or DYNTABLES_WAREHOUSE"
        ) from exc
    return warehouse


def embedded_conf(warehouse: Path, catalog: str) -> dict[str, str]:
    """Settings for the embedded default; user settings are applied on top."""
    cat = f"spark.sql.catalog.{catalog}"
    conf = {
        "spark.master": "local[*]",
        "spark.app.name": "dyntables",
        "spark.jars": str(iceberg_runtime_jar()),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.type": "hadoop",
        f"{cat}.warehouse": str(warehouse),
        # Several processes (scheduler, CLI) share one catalog: always read fresh metadata.
        f"{cat}.cache-enabled": "false",
        "spark.sql.defaultCatalog": catalog,
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(warehouse / "_spark"),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": JAVA_OPTIONS,
        "spark.executor.extraJavaOptions": JAVA_OPTIONS,
        "spark.scheduler.mode": "FAIR",
        "spark.sql.session.timeZone": "UTC",
    }
    for key, value in TABLE_DEFAULTS.items():
        conf[f"{cat}.table-default.{key}"] = value
    return conf


# Spark 3.5 pushes a comparison into the branches of a CASE (PushFoldableIntoBranches),
# then fails an assertion translating NOT over that CASE into a data source filter:
# `SELECT * FROM (SELECT IF(n > 0, m, NULL) AS c FROM t) WHERE c <> 3.33` over an
# Iceberg table, with m a DECIMAL of another scale, raises INTERNAL_ERROR. A refresh
# reads an aggregate's state so (an extreme is NULL where its count is 0) whenever a
# HAVING compares it with <>. Without the rule the comparison stays above the CASE.
EXCLUDED_OPTIMIZER_RULES = ("org.apache.spark.sql.catalyst.optimizer.PushFoldableIntoBranches",)


def exclude_optimizer_rules(spark: Any) -> None:
    """Add :data:`EXCLUDED_OPTIMIZER_RULES` to the session's excluded rules, keeping any
    the user excluded; a runtime setting, so a session given by a user gets it too."""
    key = "spark.sql.optimizer.excludedRules"
    current = [r.strip() for r in (spark.conf.get(key, "") or "").split(",") if r.strip()]
    wanted = current + [r for r in EXCLUDED_OPTIMIZER_RULES if r not in current]
    if wanted != current:
        spark.conf.set(key, ",".join(wanted))


def build_session(
    warehouse: str | os.PathLike[str],
    catalog: str = DEFAULT_CATALOG,
    conf: Mapping[str, str] | None = None,
):  # -> pyspark.sql.SparkSession (imported lazily: pyspark import costs ~0.5 s)
    """Start (or join) the process's Spark session with the Iceberg catalog configured."""
    check_java()
    settings = embedded_conf(prepare_warehouse(warehouse), catalog)
    settings.update(conf or {})
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("DYNTABLES_SPARK_LOG", "ERROR"))
    return spark
