"""Which source type changes widen a dynamic table's columns, as ALTER TABLE clauses."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dyntables.refresh.widen import _changes_values, widenings


def _row(*types) -> StructType:  # type: ignore[no-untyped-def]
    return StructType([StructField(f"c{i}", t) for i, t in enumerate(types)])


def test_iceberg_promotions_widen_the_column() -> None:
    assert widenings(
        _row(IntegerType(), FloatType(), DecimalType(5, 2)),
        _row(LongType(), DoubleType(), DecimalType(12, 2)),
    ) == [
        "ALTER COLUMN `c0` TYPE bigint",
        "ALTER COLUMN `c1` TYPE double",
        "ALTER COLUMN `c2` TYPE decimal(12,2)",
    ]


def test_equal_narrower_or_unpromotable_types_are_left_to_the_write() -> None:
    table = _row(IntegerType(), LongType(), DecimalType(5, 2), StringType(), DoubleType())
    query = _row(IntegerType(), IntegerType(), DecimalType(12, 3), IntegerType(), FloatType())
    assert widenings(table, query) == []
    assert widenings(_row(IntegerType()), _row(ShortType())) == []


def test_nested_types_widen_by_path_and_struct_fields_are_added_in_place() -> None:
    s_old = StructType([StructField("a", IntegerType()), StructField("z", IntegerType())])
    s_new = StructType(
        [
            StructField("n", StringType()),
            StructField("a", LongType()),
            StructField("b b", StructType([StructField("x", IntegerType())])),
            StructField("z", IntegerType()),
        ]
    )
    table = _row(s_old, ArrayType(IntegerType()), MapType(StringType(), FloatType()))
    query = _row(s_new, ArrayType(LongType()), MapType(StringType(), DoubleType()))
    assert widenings(table, query) == [
        "ADD COLUMN `c0`.`n` string FIRST",
        "ALTER COLUMN `c0`.`a` TYPE bigint",
        "ADD COLUMN `c0`.`b b` STRUCT<`x`: int> AFTER `a`",
        "ALTER COLUMN `c1`.`element` TYPE bigint",
        "ALTER COLUMN `c2`.`value` TYPE double",
    ]


def test_a_struct_whose_fields_moved_or_went_is_left_to_the_write() -> None:
    ab = StructType([StructField("a", IntegerType()), StructField("b", IntegerType())])
    ba = StructType([StructField("b", LongType()), StructField("a", IntegerType())])
    a = StructType([StructField("a", LongType())])
    assert widenings(_row(ab), _row(ba)) == []
    assert widenings(_row(ab), _row(a)) == []


def test_writes_that_would_change_values_are_told_from_those_that_keep_them() -> None:
    """What a FULL refresh refuses to write into a column of another type (a source
    replaced with other types): Spark's store assignment would round or truncate."""
    lossy = [
        (DoubleType(), IntegerType()),  # 7.5 as 7
        (DecimalType(10, 2), LongType()),
        (DoubleType(), FloatType()),
        (DecimalType(12, 4), DecimalType(12, 2)),
        (DoubleType(), DecimalType(20, 4)),
        (LongType(), DoubleType()),  # 2^53 + 1 as 2^53
        (IntegerType(), FloatType()),
        (DecimalType(10, 2), DoubleType()),
        (TimestampType(), DateType()),
        (TimestampNTZType(), TimestampType()),
        (TimestampType(), TimestampNTZType()),
        (
            StructType([StructField("x", DoubleType())]),
            StructType([StructField("x", IntegerType())]),
        ),
        (ArrayType(DoubleType()), ArrayType(IntegerType())),
        (MapType(StringType(), DoubleType()), MapType(StringType(), IntegerType())),
    ]
    kept = [
        (IntegerType(), LongType()),
        (IntegerType(), DoubleType()),
        (ShortType(), FloatType()),
        (DecimalType(10, 2), DecimalType(12, 2)),
        (DecimalType(10, 0), LongType()),
        (FloatType(), DoubleType()),
        (DateType(), TimestampType()),
        (StringType(), StringType()),
    ]
    assert [w for w, h in lossy if not _changes_values(w, h)] == []
    assert [(w, h) for w, h in kept if _changes_values(w, h)] == []
