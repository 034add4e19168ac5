"""Which source type changes widen a dynamic table's columns, as ALTER TABLE clauses."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
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
)

from dyntables.refresh.widen import widenings


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
