"""The oracle (DESIGN.md): after a refresh, the dynamic table equals, as a multiset, its
query over the sources pinned at the snapshots that refresh recorded."""

from __future__ import annotations

from dyntables import Lakehouse
from dyntables.catalog.definition import RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.refresh.full import pinned_query_sql


def oracle_sql(lh: Lakehouse, dt_name: str) -> str:
    dt = lh.commands.registry.get(lh.qualify(dt_name))
    table = load_table(lh.spark, dt.name)
    assert table is not None
    state = RefreshState.from_properties(table.properties())
    assert state is not None, f"{dt_name} was never refreshed"
    return pinned_query_sql(dt, dict(state.sources))


def differences(lh: Lakehouse, dt_name: str) -> tuple[int, int]:
    """(rows only in the table, rows only in the oracle), doubles rounded to 6 digits."""
    actual = lh.spark.table(lh.qualify(dt_name).sql())
    expected = lh.spark.sql(oracle_sql(lh, dt_name))
    actual, expected = _rounded(actual), _rounded(expected.toDF(*actual.columns))
    return actual.exceptAll(expected).count(), expected.exceptAll(actual).count()


def _rounded(df):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    cols = [
        F.round(F.col(f"`{f.name}`"), 6).alias(f.name)
        if isinstance(f.dataType, (DoubleType, FloatType))
        else F.col(f"`{f.name}`")
        for f in df.schema.fields
    ]
    return df.select(*cols)


def assert_oracle(lh: Lakehouse, dt_name: str) -> None:
    extra, missing = differences(lh, dt_name)
    assert (extra, missing) == (0, 0), f"{dt_name}: {extra} unexpected rows, {missing} missing rows"
