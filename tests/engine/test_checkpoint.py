"""Frames a refresh caches, against real Spark and Iceberg: Spark answers any part of a
query from a cached plan of the same result, and an Iceberg table equals itself at every
snapshot, so a cached read of an old version must not answer a read of the new one."""

from __future__ import annotations

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.engine.checkpoint import cached_alone


def test_a_cached_old_version_answers_only_its_own_reads(lh: Lakehouse, unique) -> None:
    t = unique("t")
    name = lh.qualify(t).sql()
    lh.sql(f"CREATE TABLE {t} (k INT); INSERT INTO {t} VALUES (1)")
    old = load_table(lh.spark, lh.qualify(t)).current_snapshot_id()
    lh.sql(f"INSERT INTO {t} VALUES (2)")
    new = load_table(lh.spark, lh.qualify(t)).current_snapshot_id()

    def read(version: int | None) -> list[int]:
        return sorted(
            r[0]
            for r in lh.spark.sql(f"SELECT k AS c FROM {name} VERSION AS OF {version}").collect()
        )

    # what the bare cache does: the old rows answer the new version's read
    plain = lh.spark.sql(f"SELECT k AS c FROM {name} VERSION AS OF {old}").persist()
    try:
        plain.count()
        assert read(new) == [1]
    finally:
        plain.unpersist()
    stored, readable = cached_alone(
        lh.spark.sql(f"SELECT k AS c FROM {name} VERSION AS OF {old}"), "refresh_1"
    )
    try:
        assert readable.columns == ["c"]
        assert "InMemoryRelation" in str(readable._jdf.queryExecution().withCachedData())
        assert [r[0] for r in readable.collect()] == [1]
        assert read(new) == [1, 2]
        assert read(old) == [1]
    finally:
        stored.unpersist()
