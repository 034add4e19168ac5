"""Widening a dynamic table's columns after its sources' types were widened.

A source column promoted in place (INT -> BIGINT, FLOAT -> DOUBLE, a DECIMAL's
precision raised, a struct field added) makes the query return a wider type than the
table was created with. Rows are written into the table's types, so without this a
FULL refresh fails on the first value that no longer fits, or, for FLOAT, silently
rounds every value. Iceberg promotes these types in place (old data files stay
readable), so the table follows the query instead of being rebuilt. Any other
difference is left to Spark's write and its store-assignment rules.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dyntables.sql.tokens import TableName, back_quoted


def widen_table(spark: Any, name: TableName, returns: StructType) -> list[str]:
    """Promote the table's columns that ``returns`` (the rows about to be written) widened;
    the clauses run, for the refresh's stats. A schema change commits at once, outside
    the refresh's staged snapshot: if the refresh then fails, the table is only wider,
    and the source's promotion is still in the next refresh's range."""
    clauses = widenings(spark.table(name.sql()).schema, returns)
    for clause in clauses:
        spark.sql(f"ALTER TABLE {name.sql()} {clause}")
    return clauses


def widenings(table: StructType, query: StructType) -> list[str]:
    """``ALTER TABLE`` clauses making ``table``'s columns as wide as ``query``'s, which
    match them by position (the query's rows are written by position)."""
    out: list[str] = []
    for have, want in zip(table.fields, query.fields, strict=False):
        _widen((have.name,), have.dataType, want.dataType, out)
    return out


def _widen(path: tuple[str, ...], have: DataType, want: DataType, out: list[str]) -> None:
    if _promotes(have, want):
        out.append(f"ALTER COLUMN {_path(path)} TYPE {ddl_type(want)}")
    elif isinstance(have, StructType) and isinstance(want, StructType):
        _widen_struct(path, have, want, out)
    elif isinstance(have, ArrayType) and isinstance(want, ArrayType):
        _widen((*path, "element"), have.elementType, want.elementType, out)
    elif isinstance(have, MapType) and isinstance(want, MapType):
        _widen((*path, "value"), have.valueType, want.valueType, out)


def _widen_struct(
    path: tuple[str, ...], have: StructType, want: StructType, out: list[str]
) -> None:
    """Fields are matched by name; added fields go where the query has them. A struct
    whose fields were reordered or dropped is left to the write."""
    theirs = {f.name.lower(): f for f in have.fields}
    wanted = [f.name.lower() for f in want.fields]
    if [n for n in wanted if n in theirs] != [f.name.lower() for f in have.fields]:
        return
    previous: str | None = None
    for field in want.fields:
        old = theirs.get(field.name.lower())
        if old is None:
            where = "FIRST" if previous is None else f"AFTER {back_quoted(previous)}"
            out.append(
                f"ADD COLUMN {_path((*path, field.name))} {ddl_type(field.dataType)} {where}"
            )
        else:
            _widen((*path, old.name), old.dataType, field.dataType, out)
        previous = field.name if old is None else old.name


def _promotes(have: DataType, want: DataType) -> bool:
    """Iceberg's in-place type promotions."""
    if isinstance(have, IntegerType) and isinstance(want, LongType):
        return True
    if isinstance(have, FloatType) and isinstance(want, DoubleType):
        return True
    return (
        isinstance(have, DecimalType)
        and isinstance(want, DecimalType)
        and want.scale == have.scale
        and want.precision > have.precision
    )


def ddl_type(t: DataType) -> str:
    """A type as Spark DDL, with struct field names quoted."""
    if isinstance(t, StructType):
        fields = ", ".join(f"{back_quoted(f.name)}: {ddl_type(f.dataType)}" for f in t.fields)
        return f"STRUCT<{fields}>"
    if isinstance(t, ArrayType):
        return f"ARRAY<{ddl_type(t.elementType)}>"
    if isinstance(t, MapType):
        return f"MAP<{ddl_type(t.keyType)}, {ddl_type(t.valueType)}>"
    return t.simpleString()


def _path(parts: tuple[str, ...]) -> str:
    return ".".join(back_quoted(p) for p in parts)


def narrowings(spark: Any, name: TableName, returns: StructType) -> list[str]:
    """The columns whose rows, written by position, Spark's store assignment would cast
    without an error but with another value: a fraction into an integer column (7.5
    written as 7), a DOUBLE into a FLOAT, a DECIMAL into one of a smaller scale or a
    floating point number into a DECIMAL (rounded), a timestamp into a DATE, a
    TIMESTAMP_NTZ into a TIMESTAMP (or back). Run after widen_table; a source's type
    changes this way only by replacing the source (DROP and CREATE, CREATE OR REPLACE
    TABLE). A value that does not fit at all fails the write, as before."""
    table = spark.table(name.sql()).schema
    return [
        column_change(have, want)
        for have, want in zip(table.fields, returns.fields, strict=False)
        if _changes_values(want.dataType, have.dataType)
    ]


def column_change(have: StructField, want: StructField) -> str:
    """How an error names a column whose rows no longer fit it."""
    return (
        f"{have.name} is now {want.dataType.simpleString()}, the table has "
        f"{have.dataType.simpleString()}"
    )


def _changes_values(want: DataType, have: DataType) -> bool:
    """Whether writing ``want`` values into a ``have`` column changes some of them
    (rounds or truncates) without failing; within structs (by position, as Spark
    assigns them), arrays and maps too."""
    if isinstance(want, StructType) and isinstance(have, StructType):
        pairs = zip(want.fields, have.fields, strict=False)
        return any(_changes_values(w.dataType, h.dataType) for w, h in pairs)
    if isinstance(want, ArrayType) and isinstance(have, ArrayType):
        return _changes_values(want.elementType, have.elementType)
    if isinstance(want, MapType) and isinstance(have, MapType):
        return _changes_values(want.keyType, have.keyType) or _changes_values(
            want.valueType, have.valueType
        )
    # a BIGINT beyond 2^53 as a DOUBLE, an INT beyond 2^24 as a FLOAT, a DECIMAL as either
    if isinstance(have, FloatType | DoubleType) and isinstance(want, LongType | DecimalType):
        return True
    if isinstance(have, FloatType) and isinstance(want, IntegerType):
        return True
    fractional = isinstance(want, FloatType | DoubleType) or (
        isinstance(want, DecimalType) and want.scale > 0
    )
    if fractional and isinstance(have, ByteType | ShortType | IntegerType | LongType):
        return True
    if isinstance(want, DoubleType) and isinstance(have, FloatType):
        return True
    if isinstance(have, DecimalType):
        if isinstance(want, FloatType | DoubleType):
            return True
        if isinstance(want, DecimalType) and want.scale > have.scale:
            return True
    if isinstance(want, TimestampType | TimestampNTZType) and isinstance(have, DateType):
        return True
    # a local time read as an instant in the session's time zone, or the reverse
    zoned = (TimestampType, TimestampNTZType)
    return any(isinstance(want, a) and isinstance(have, b) for a, b in (zoned, zoned[::-1]))
