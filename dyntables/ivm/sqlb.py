"""Small builders for the SQL the delta rules emit (sqlglot trees, never f-strings)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence

from sqlglot import exp

W = "__w"  # weight column of a Z-set delta: +n inserts, -n deletes

_aliases = itertools.count()


def fresh_alias(prefix: str = "t") -> str:
    return f"_{prefix}{next(_aliases)}"


def sub(q: exp.Query, alias: str | None = None) -> exp.Subquery:
    return q.subquery(alias or fresh_alias())


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table)


def lit(value: int | str) -> exp.Expr:
    return exp.Literal.number(value) if isinstance(value, int) else exp.Literal.string(value)


def alias(e: exp.Expr, name: str) -> exp.Expr:
    return exp.alias_(e, name)


def group_key(e: exp.Expr) -> exp.Expr:
    """``e`` as a GROUP BY item: Spark reads an integer literal there (``0``, ``(-1)``) as a
    position in the select list, so such a key (a constant the compiler groups by: the
    value of ``COUNT(DISTINCT 0)``, a constant column of a subquery) is wrapped in a
    CAST to its own type, INT, which Spark reads as a value."""
    inner = e.unnest()
    number = inner.this if isinstance(inner, exp.Neg) else inner
    if isinstance(number, exp.Literal) and not number.is_string:
        text = number.this
        value = int(text) if text.isdigit() else None
        if value is not None and inner is not number:
            value = -value
        if value is not None and -(2**31) <= value < 2**31:
            return exp.Cast(this=e.copy(), to=exp.DataType.build("int"))
    return e.copy()


def select(items: Iterable[exp.Expr | str], source: exp.Expr | str) -> exp.Select:
    return exp.select(*items).from_(source)


def star_from(q: exp.Query) -> exp.Select:
    return exp.select("*").from_(sub(q))


def project_cols(names: Sequence[str], q: exp.Query, with_weight: bool = False) -> exp.Select:
    items: list[exp.Expr] = [col(n) for n in names]
    if with_weight:
        items.append(col(W))
    return exp.select(*items).from_(sub(q))


def union_all(parts: Sequence[exp.Query]) -> exp.Query:
    assert parts
    result: exp.Query = parts[0]
    for part in parts[1:]:
        result = exp.union(result, part, distinct=False)
    return result


def eq_all(left: Sequence[exp.Expr], right: Sequence[exp.Expr]) -> exp.Expr:
    return exp.and_(
        *(exp.EQ(this=a.copy(), expression=b.copy()) for a, b in zip(left, right, strict=True))
    )


def null_safe_eq_all(left: Sequence[exp.Expr], right: Sequence[exp.Expr]) -> exp.Expr:
    if not left:
        return exp.true()
    return exp.and_(
        *(
            exp.NullSafeEQ(this=a.copy(), expression=b.copy())
            for a, b in zip(left, right, strict=True)
        )
    )


@functools.lru_cache(maxsize=512)
def _data_type(type_sql: str) -> exp.DataType:
    return exp.DataType.build(type_sql, dialect="spark")


def cast(e: exp.Expr, type_sql: str) -> exp.Cast:
    """``CAST(e AS type_sql)``, always written. sqlglot's ``exp.cast`` leaves out a cast
    of a cast within one type family (a DECIMAL(10,2) cast to DECIMAL(20,2) stays
    DECIMAL(10,2)), and parses the type on every call: a tenth of an aggregate's
    refresh in Python went to parsing the same few types. The parsed type is cached,
    and copied into each tree."""
    return exp.Cast(this=e, to=_data_type(type_sql).copy())


def typed_null(type_sql: str) -> exp.Expr:
    return cast(exp.null(), type_sql)


def raise_error(message: str) -> exp.Expr:
    return exp.Anonymous(this="raise_error", expressions=[lit(message)])


def sign(e: exp.Expr) -> exp.Expr:
    return exp.If(this=exp.GT(this=e, expression=lit(0)), true=lit(1), false=lit(-1))


def empty(q: exp.Select) -> exp.Select:
    return q.where(exp.false())
