"""The oracle itself must be able to fail: a table that differs from its query, by one
extra copy of an existing row (bag semantics) or one missing row, is caught."""

from __future__ import annotations

import pytest

from dyntables import Lakehouse
from tests.oracle import assert_oracle


def test_the_oracle_catches_an_extra_copy_and_a_missing_row(lh: Lakehouse, unique) -> None:
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"CREATE TABLE {src} (k STRING, v DOUBLE); INSERT INTO {src} VALUES ('a', 0.1), ('b', 2)"
    )
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS SELECT k, v * 3 AS v3 FROM {src}")
    assert_oracle(lh, dt)
    table = lh.qualify(dt).sql()
    # behind the dynamic table's back (the facade refuses DML on it)
    lh.spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE k = 'a'")
    with pytest.raises(AssertionError, match="1 unexpected rows, 0 missing rows"):
        assert_oracle(lh, dt)
    lh.spark.sql(f"DELETE FROM {table} WHERE k = 'b'")
    with pytest.raises(AssertionError, match="1 unexpected rows, 1 missing rows"):
        assert_oracle(lh, dt)


def test_the_oracle_compares_maps_by_their_entries(lh: Lakehouse, unique) -> None:
    """Spark cannot group a MAP: the oracle compares its entries, in any order."""
    src, dt = unique("src"), unique("dt")
    lh.sql(f"CREATE TABLE {src} (k INT, m MAP<STRING, INT>)")
    lh.sql(f"INSERT INTO {src} VALUES (1, map('a', 1, 'b', 2)), (2, NULL)")
    lh.sql(f"CREATE DYNAMIC TABLE {dt} AS SELECT k, m FROM {src}")
    assert_oracle(lh, dt)
    table = lh.qualify(dt).sql()
    lh.spark.sql(f"UPDATE {table} SET m = map('b', 2, 'a', 1) WHERE k = 1")
    assert_oracle(lh, dt)  # the same MAP
    lh.spark.sql(f"UPDATE {table} SET m = map('a', 1, 'b', 3) WHERE k = 1")
    with pytest.raises(AssertionError, match="1 unexpected rows, 1 missing rows"):
        assert_oracle(lh, dt)
