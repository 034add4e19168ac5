"""Intermediate results every later statement of a refresh must read the same.

A cached frame (``persist``) is not enough where its values depend on the order in
which Spark adds floating-point numbers (a DOUBLE sum, a STDDEV recomputed): writing a
table recaches every cached plan that reads it, and the recomputation can round the last
bit differently. An aggregate's change reads its state table and the refresh writes
that table, so the state could keep one rounding and the dynamic table another, and
the next refresh finds the table and its state disagreeing. A local checkpoint is
computed once and has no plan left to recompute; its blocks stay on the executors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any


def frozen(df: Any) -> Any:
    """``df`` computed now, once, and kept (a local checkpoint)."""
    return df.localCheckpoint(eager=True)


def release(df: Any) -> None:
    """Drop a :func:`frozen` frame's blocks now rather than when the JVM collects it."""
    try:
        df._jdf.queryExecution().analyzed().rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - Spark's context cleaner drops them later anyway
        pass


def forget_view(spark: Any, name: str) -> None:
    """Drop the temp view ``name``, its name only. ``spark.catalog.dropTempView`` also
    looks for cached plans that use the view and recompiles them, comparing every
    cached plan (1-2.5 ms a view, ~70 ms of a small refresh's cleanup); a refresh
    unpersists what it cached itself, so nothing is left to look for."""
    spark._jsparkSession.sessionState().catalog().dropTempView(name)


def cached_alone(df: Any, tag: str) -> tuple[Any, Any]:
    """``df`` cached under a plan no other query matches, and a frame that reads the
    cache: (the cached frame, to unpersist; the frame to read).

    Spark answers any part of a query from a cached plan of the same result, and an
    Iceberg table compares equal to itself at every snapshot (``SparkTable.equals``
    looks at the name alone): a cached ``SELECT k FROM t VERSION AS OF <old>`` answered
    ``SELECT k FROM t VERSION AS OF <new>`` with the old rows, in the same refresh or in
    another one running beside it. A column holding ``tag`` (unique to the refresh and
    the frame) makes the cached plan match only its own reads."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    columns = df.columns
    marker = "__dyntables_cached"
    while marker in columns:
        marker += "_"
    tagged = df.withColumn(marker, F.lit(tag))
    with _planned_in_its_own_session(df.sparkSession):
        cached = tagged.persist(StorageLevel.MEMORY_AND_DISK)
    return cached, cached.select(*(F.col("`" + c.replace("`", "``") + "`") for c in columns))


# Spark plans a query it caches in a clone of the session with these off, unless they
# already are; the clone sets its catalogs up anew, and nothing closes them: on a JDBC
# catalog, a connection pool per cached frame, per refresh. Neither changes a result
# (one is about Spark's own bucketed file tables, the other about how AQE partitions a
# query's last stage).
_CLONED_FOR_CACHING = (
    "spark.sql.adaptive.applyFinalStageShuffleOptimizations",
    "spark.sql.sources.bucketing.autoBucketedScan.enabled",
)


def _planned_in_its_own_session(spark: Any) -> AbstractContextManager[None]:
    """While a frame is cached: the settings Spark would clone the session to turn off,
    off in it, then as they were."""
    return settings_for_a_while(spark, dict.fromkeys(_CLONED_FOR_CACHING, "false"))


@contextmanager
def settings_for_a_while(spark: Any, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` set in ``spark``, then put back as they were (unset if they were)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
