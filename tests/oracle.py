"""The oracle (DESIGN.md): after a refresh, the dynamic table equals, as a multiset, its
query over the sources pinned at the snapshots that refresh recorded (and on the day it
recorded, for a query reading CURRENT_DATE)."""

from __future__ import annotations

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.refresh.day import dated
from dyntables.refresh.full import pinned_query_sql
from dyntables.sql.tokens import back_quoted


def oracle_sql(lh: Lakehouse, dt_name: str) -> str:
    dt = lh.commands.registry.get(lh.qualify(dt_name))
    table = load_table(lh.spark, dt.name)
    assert table is not None
    state = RefreshState.from_properties(table.properties())
    assert state is not None, f"{dt_name} was never refreshed"
    return pinned_query_sql(lh.spark, dated(dt, state.day), dict(state.sources))


def differences(lh: Lakehouse, dt_name: str) -> tuple[int, int]:
    """(rows only in the table, rows only in the oracle), doubles rounded to 6 digits."""
    actual = lh.spark.table(lh.qualify(dt_name).sql())
    expected = lh.spark.sql(oracle_sql(lh, dt_name))
    actual, expected = _rounded(actual), _rounded(expected.toDF(*actual.columns))
    return actual.exceptAll(expected).count(), expected.exceptAll(actual).count()


def _rounded(df):  # type: ignore[no-untyped-def]
    """Doubles rounded; a MAP (which Spark cannot group) as its entries, each as JSON,
    sorted (a MAP's entries have no order of their own)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType, MapType

    def normal(f):  # type: ignore[no-untyped-def]
        c = back_quoted(f.name)
        if isinstance(f.dataType, (DoubleType, FloatType)):
            return F.round(F.col(c), 6).alias(f.name)
        if isinstance(f.dataType, MapType):
            return F.expr(f"array_sort(transform(map_entries({c}), e -> to_json(e)))").alias(f.name)
        return F.col(c)

    return df.select(*[normal(f) for f in df.schema.fields])


def assert_oracle(lh: Lakehouse, dt_name: str) -> None:
    """Checked in one Spark job (per distinct row: copies in the table minus copies in the
    oracle); the two EXCEPT ALLs of :func:`differences` run only to explain a mismatch."""
    from pyspark.sql import functions as F

    actual = lh.spark.table(lh.qualify(dt_name).sql())
    expected = lh.spark.sql(oracle_sql(lh, dt_name)).toDF(*actual.columns)
    weight = "__oracle_weight"
    signed = (
        _rounded(actual)
        .withColumn(weight, F.lit(1))
        .unionByName(_rounded(expected).withColumn(weight, F.lit(-1)))
    )
    cols = [F.col(back_quoted(c)) for c in actual.columns]
    if not signed.groupBy(*cols).agg(F.sum(weight).alias(weight)).where(F.col(weight) != 0).count():
        return
    extra, missing = differences(lh, dt_name)
    raise AssertionError(f"{dt_name}: {extra} unexpected rows, {missing} missing rows")
