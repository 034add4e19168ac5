"""PIVOT as the GROUP BY Spark computes for it, pure.

``FROM rel PIVOT (agg AS a, ... FOR p IN (v1, v2, ...))`` groups rel by its other
columns (those neither pivoted nor aggregated) and gives each pair of a value and an
aggregate a column: the aggregate over the group's rows whose ``p <=> CAST(v AS type of
p)``. Written as that GROUP BY with ``FILTER (WHERE ...)`` aggregates, it is maintained
by the aggregate rule like any other.

Spark computes a pivot one of two ways, and they differ over a value no row of a group
has: when every aggregate's result is a number or a boolean, it aggregates per (group,
value) first and places the results (PivotFirst), so such a cell is NULL, a COUNT's
too; otherwise every aggregate reads ``IF(p <=> v, x, NULL)``, and a COUNT of no rows
is 0. The first is written ``CASE WHEN COUNT(*) FILTER (...) > 0 THEN agg FILTER (...)
END``; checked against Spark for both ways by the differential corpus
(``pivot-as-group-by.scn``).

What this does not write exactly refreshes FULL with ``PIVOT``: aggregates other than
COUNT, SUM, AVG, MIN and MAX (FIRST reads non-NULL values only in one of the two ways),
DISTINCT or FILTER inside them, pivots by several columns or by a FLOAT/DOUBLE column
(-0.0), values that are not plain literals of the column's kind (two of them could cast
to one value), and a pivot over a FROM clause with joins.

``UNPIVOT (v FOR c IN (a, b AS x))`` makes of each row one row per listed column: the
other columns, the column's name (as written, or its alias) and its value, without the
rows whose values are all NULL unless INCLUDE NULLS. That is a function of the row
alone, the LATERAL VIEW ``inline(array(struct('a' AS c, a AS v), ...))`` whose rule
the generators have; ``array`` widens the values' types as UNPIVOT does (checked
against Spark for INT beside BIGINT, DECIMAL and DOUBLE).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from dyntables.plan.not_incremental import NotIncremental

_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
_PLACED_FIRST = exp.DataType.NUMERIC_TYPES | {exp.DataType.Type.BOOLEAN}


def _refuse(detail: str) -> NotIncremental:
    return NotIncremental("PIVOT", "PIVOT", f"{detail}; recomputed FULL")


def pivoted_source(select: exp.Select) -> exp.Expr | None:
    """The FROM relation of ``select`` when it carries a PIVOT or UNPIVOT."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or not from_.this.args.get("pivots"):
        return None
    source: exp.Expr = from_.this
    return source


_NAMES = "dyntables_unpivot_names"
_GENERATED = "__dyntables_unpivot"


def mark_unpivot_names(tree: exp.Expr) -> None:
    """Record on each UNPIVOT the names its rows carry, as written: qualifying the query
    lower-cases every identifier, and ``IN (Amount)`` names its rows ``Amount``."""
    for node in tree.find_all(exp.Pivot):
        if not node.args.get("unpivot") or len(node.args.get("fields") or []) != 1:
            continue
        names = []
        for entry in node.args["fields"][0].expressions:
            if isinstance(entry, exp.PivotAlias):
                names.append(entry.alias)
                continue
            parts = entry.expressions if isinstance(entry, exp.Tuple) else [entry]
            names.append("_".join(p.name for p in parts))
        node.meta[_NAMES] = names


def as_lateral_view(select: exp.Select, columns: Sequence[str]) -> exp.Select:
    """``select``, whose FROM relation (of output ``columns``) carries an UNPIVOT,
    reading instead the LATERAL VIEW that computes it, under the unpivot's alias."""
    source = pivoted_source(select)
    assert source is not None
    (unpivot,) = source.args["pivots"]
    names = unpivot.meta.get(_NAMES)
    fields = unpivot.args.get("fields") or []
    if select.args.get("joins") or select.args.get("laterals"):
        raise NotIncremental("PIVOT", "UNPIVOT", "of a FROM clause with joins; recomputed FULL")
    if names is None:  # mark_unpivot_names takes one name column
        raise NotIncremental("PIVOT", "UNPIVOT", "of several name columns; recomputed FULL")
    if not columns or any(c == "*" for c in columns):
        raise NotIncremental("PIVOT", "UNPIVOT", "of a relation whose columns are not known")
    entries = [e.this if isinstance(e, exp.PivotAlias) else e for e in fields[0].expressions]
    value_names = [v.name for v in unpivot.expressions]
    if isinstance(unpivot.expressions[0], exp.Tuple):
        value_names = [v.name for v in unpivot.expressions[0].expressions]
    name_column = fields[0].this.name
    rows = []
    read: set[str] = set()
    for name, entry in zip(names, entries, strict=True):
        values = entry.expressions if isinstance(entry, exp.Tuple) else [entry]
        if len(values) != len(value_names) or not all(isinstance(v, exp.Column) for v in values):
            raise NotIncremental("PIVOT", "UNPIVOT", "values other than columns")
        read |= {v.name.lower() for v in values}
        fields_of_row = [exp.alias_(exp.Literal.string(name), name_column)]
        fields_of_row += [exp.alias_(v.copy(), n) for v, n in zip(values, value_names, strict=True)]
        rows.append(exp.Struct(expressions=fields_of_row))
    table = source.alias_or_name
    made = [name_column, *value_names]
    view = exp.Lateral(
        this=exp.Inline(this=exp.Array(expressions=rows)),
        view=True,
        alias=exp.TableAlias(
            this=exp.to_identifier(_GENERATED),
            columns=[exp.to_identifier(c) for c in made],
        ),
    )
    keys_out = [exp.column(c, table=table) for c in columns if c.lower() not in read]
    out_items = [*keys_out, *(exp.column(c, table=_GENERATED) for c in made)]
    expanded = exp.Select(expressions=out_items).from_(_without_pivots(source))
    expanded.set("laterals", [view])
    if not unpivot.args.get("include_nulls"):
        all_null = exp.and_(
            *(
                exp.Is(this=exp.column(v, table=_GENERATED), expression=exp.null())
                for v in value_names
            )
        )
        expanded = expanded.where(exp.Not(this=exp.paren(all_null)))
    return _reading(select, expanded, unpivot.alias or table)


def as_group_by(select: exp.Select, columns: Sequence[str]) -> exp.Select:
    """``select``, whose FROM relation (of output ``columns``) carries a PIVOT, reading
    instead the GROUP BY that computes the pivot, under the pivot's alias and with the
    columns named as sqlglot names the pivot's (types annotated, as qualified)."""
    source = pivoted_source(select)
    assert source is not None
    pivots = source.args["pivots"]
    if len(pivots) != 1 or select.args.get("joins") or select.args.get("laterals"):
        raise _refuse("a pivot of a FROM clause with joins")
    if not columns or any(c == "*" for c in columns):  # the GROUP BY would miss keys
        raise _refuse("a pivot of a relation whose columns are not known")
    pivot: exp.Pivot = pivots[0]
    fields = pivot.args.get("fields") or []
    if len(fields) != 1 or not isinstance(fields[0], exp.In):
        raise _refuse("a pivot by several columns")
    column = fields[0].this
    if not isinstance(column, exp.Column):
        raise _refuse("a pivot by several columns")
    ptype = column.type
    if ptype is None or ptype.this in exp.DataType.FLOAT_TYPES | {exp.DataType.Type.UNKNOWN}:
        raise _refuse("a pivot column of an unknown or floating-point type")
    values = [v.this if isinstance(v, exp.PivotAlias) else v for v in fields[0].expressions]
    keys = [_value_key(v, ptype) for v in values]
    if None in keys or len(set(keys)) != len(keys):
        raise _refuse("pivot values other than distinct literals of the column's type")

    aggregates = [a.this if isinstance(a, exp.Alias) else a for a in pivot.expressions]
    for agg in aggregates:
        if not isinstance(agg, _AGGREGATES) or agg.find(exp.Distinct, exp.Filter):
            raise _refuse(f"{agg.sql('spark')} in a pivot")
    types = [a.type.this if a.type is not None else exp.DataType.Type.UNKNOWN for a in aggregates]
    if exp.DataType.Type.UNKNOWN in types:
        raise _refuse("an aggregate of an unknown type in a pivot")
    placed_first = all(t in _PLACED_FIRST for t in types)

    names = pivot.args.get("columns") or []
    if len(names) != len(values) * len(aggregates):
        raise _refuse("pivot columns sqlglot does not name")
    read = {c.name.lower() for agg in aggregates for c in agg.find_all(exp.Column)}
    read.add(column.name.lower())
    table = source.alias_or_name
    keys_out = [exp.column(c, table=table) for c in columns if c.lower() not in read]

    cells: list[exp.Expr] = []
    names_iter = iter(names)
    for value in values:
        matches = exp.NullSafeEQ(
            this=column.copy(), expression=exp.cast(value.copy(), ptype.copy())
        )
        for agg in aggregates:
            cell: exp.Expr = exp.Filter(this=agg.copy(), expression=exp.Where(this=matches.copy()))
            if placed_first:
                rows = exp.Filter(
                    this=exp.Count(this=exp.Star()), expression=exp.Where(this=matches.copy())
                )
                cell = exp.Case(
                    ifs=[
                        exp.If(this=exp.GT(this=rows, expression=exp.Literal.number(0)), true=cell)
                    ]
                )
            cells.append(exp.alias_(cell, next(names_iter).name, quoted=True))

    grouped = exp.Select(expressions=[*keys_out, *cells]).from_(_without_pivots(source))
    if keys_out:
        grouped = grouped.group_by(*[k.copy() for k in keys_out])
    return _reading(select, grouped, pivot.alias or table)


def _without_pivots(source: exp.Expr) -> exp.Expr:
    plain = source.copy()
    plain.set("pivots", None)
    return plain


def _reading(select: exp.Select, body: exp.Select, alias: str) -> exp.Select:
    """``select`` reading ``body``, under ``alias``, in place of its FROM relation."""
    out = select.copy()
    out.set("from_", exp.From(this=body.subquery(alias)))
    return out


def _value_key(value: exp.Expr, ptype: exp.DataType) -> object | None:
    """A pivot value as the value it casts to, for the kinds whose cast is plain (None:
    another kind, refused)."""
    kind = ptype.this
    if isinstance(value, exp.Null):
        return ("null",)
    negative = isinstance(value, exp.Neg)
    literal = value.this if negative else value
    if kind in exp.DataType.TEXT_TYPES:
        is_text = isinstance(value, exp.Literal) and value.is_string
        return ("s", value.this) if is_text else None
    if kind == exp.DataType.Type.BOOLEAN:
        return ("b", value.this) if isinstance(value, exp.Boolean) else None
    if kind == exp.DataType.Type.DATE:
        if not (isinstance(value, exp.Cast) and value.to.this == exp.DataType.Type.DATE):
            return None
        text = value.this
        if not (isinstance(text, exp.Literal) and text.is_string):
            return None
        try:
            return ("d", datetime.date.fromisoformat(text.this))
        except ValueError:
            return None
    if kind in exp.DataType.NUMERIC_TYPES:
        if not (isinstance(literal, exp.Literal) and not literal.is_string):
            return None
        try:
            number = Decimal(literal.this)
        except InvalidOperation:
            return None
        number = -number if negative else number
        exponent = number.as_tuple().exponent
        if not isinstance(exponent, int):
            return None
        scale = max(0, -exponent)
        if kind in exp.DataType.INTEGER_TYPES and scale:
            return None
        if kind == exp.DataType.Type.DECIMAL:
            params = ptype.expressions
            allowed = int(params[1].this.this) if len(params) > 1 else 0
            if scale > allowed:
                return None
        return ("n", number)
    return None
