"""The qualified query's types: sqlglot's annotation, with the columns a generator
makes (a LATERAL VIEW's, a derived table's ``posexplode(a) AS (p, v)``) and the plain
calls whose type Spark fixes (``date_trunc`` and the other calls kept as written,
``window()``'s bounds, ``pmod`` of integers, ``hash``) and a MAP's values typed as
Spark types them.

sqlglot 30 types a lateral view's column as its generator's argument
(``explode(a) g AS v`` makes ``g.v`` an ``ARRAY<INT>``, not an ``INT``) and leaves
posexplode's and a map's second column, a stack's columns and those of a generator
named ``AS (p, v)`` unknown. A wrong type is worse than none: a grouping set's absent
key became ``CAST(NULL AS ARRAY<INT>)`` beside an INT (CREATE failed), and an IN over
such a column was refused for a type it does not have. Pure: no Spark import.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.scope import Scope, traverse_scope

from dyntables.plan.generators import generated_types
from dyntables.plan.query import protected_call_type

E = TypeVar("E", bound=exp.Expr)

# a lateral column's type where its generator's argument does not tell: one sqlglot
# keeps (UNKNOWN it would replace by the argument's type) and carries into what is
# computed from the column; UNKNOWN once the tree is typed
_UNTYPED = exp.DataType.build("dyntables_untyped", udt=True)


def annotated(tree: E, schema: dict[str, object]) -> E:
    """``tree`` typed. Where sqlglot types a node otherwise than Spark (the columns of a
    lateral view or of a derived table's generator of several columns; a plain call
    whose type Spark fixes, such as ``date_trunc`` or ``pmod`` of integers), the tree is
    annotated again with those nodes' types given, so that what is computed from them
    (``v + 1``, ``SUM(v)``, a derived table's column) follows; again while one of them
    reads another (``explode(sequence(0, pmod(k, 4)))``)."""
    tree = annotate_types(tree, schema=schema, dialect="spark")
    known = sum(1 for _ in tree.find_all(exp.Lateral, exp.Aliases, exp.Anonymous, exp.Bracket))
    if not known:
        return tree
    for _ in range(known + 1):
        given = _generated_column_types(tree) + _call_types(tree) + _map_value_types(tree)
        if all(node.type == typ for node, typ in given):
            break
        # sqlglot does not descend into a node whose type is given: what is under one
        # keeps the type it has
        under = {id(n) for node, _ in given for n in node.walk()}
        for node in tree.walk():
            if id(node) not in under:
                node.type = None
        for node, typ in given:
            node.type = typ
        tree = annotate_types(tree, schema=schema, dialect="spark", overwrite_types=False)
    for node in tree.walk():
        if node.type is not None and node.type.this == exp.DataType.Type.USERDEFINED:
            node.type = exp.DataType.build("unknown")
    return tree


_BUCKETED = (
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ,  # Spark's TIMESTAMP
    exp.DataType.Type.TIMESTAMPLTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
    exp.DataType.Type.DATE,
)
_INTEGRAL = (
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
)


def _call_types(tree: exp.Expr) -> list[tuple[exp.Expr, exp.DataType]]:
    """Plain calls (untyped to sqlglot) with the type Spark gives them."""
    out: list[tuple[exp.Expr, exp.DataType]] = []
    for node in tree.find_all(exp.Anonymous):
        typ = protected_call_type(node) or _plain_call_type(node)
        if typ is not None:
            out.append((node, typ))
    return out


def _map_value_types(tree: exp.Expr) -> list[tuple[exp.Expr, exp.DataType]]:
    """``m[key]`` and ``element_at(m, key)`` of a MAP: its value type (sqlglot types an
    array's element, not a map's value, and an IN over ``m['a']`` was refused for it)."""
    out: list[tuple[exp.Expr, exp.DataType]] = []
    for node in tree.find_all(exp.Bracket):
        kind = node.this.type
        if (
            isinstance(kind, exp.DataType)
            and kind.is_type(exp.DataType.Type.MAP)
            and len(kind.expressions) == 2
            and len(node.expressions) == 1
        ):
            out.append((node, kind.expressions[1].copy()))
    return out


def _plain_call_type(node: exp.Anonymous) -> exp.DataType | None:
    name = node.name.lower()
    if name == "hash":
        return exp.DataType.build("int")
    if name == "window" and node.expressions:
        # a time bucket: the start and end of its time column's type (a DATE's are
        # TIMESTAMPs, as Spark casts it)
        kind = node.expressions[0].type
        if isinstance(kind, exp.DataType) and kind.is_type(*_BUCKETED):
            bound = "timestamp_ntz" if kind.is_type(exp.DataType.Type.TIMESTAMPNTZ) else "timestamp"
            return exp.DataType.build(f"struct<start: {bound}, end: {bound}>", dialect="spark")
        return None
    if name == "pmod" and len(node.expressions) == 2:
        # integers: the wider of the two, as Spark widens them; else left untyped
        kinds = [a.type.this for a in node.expressions if isinstance(a.type, exp.DataType)]
        if len(kinds) == 2 and all(k in _INTEGRAL for k in kinds):
            return exp.DataType.build(max(kinds, key=_INTEGRAL.index))
    return None


def _generated_column_types(tree: exp.Expr) -> list[tuple[exp.Column, exp.DataType]]:
    """Each column read from a LATERAL VIEW or from a derived table's generator of
    several columns (``posexplode(a) AS (p, v)``), with Spark's type for it
    (``_UNTYPED`` where the generator's argument does not tell: never the argument's
    own type, nor the first column's)."""
    out: list[tuple[exp.Column, exp.DataType]] = []
    for scope in traverse_scope(tree):
        for column in scope.columns:
            generator = _generator_of(column, scope)
            if generator is None:
                continue
            call, names = generator
            types = generated_types(call)
            i = names.index(column.name.lower()) if column.name.lower() in names else -1
            known = types is not None and len(types) == len(names) and i >= 0
            out.append((column, types[i].copy() if known and types else _UNTYPED.copy()))
    return out


def _generator_of(column: exp.Column, scope: Scope) -> tuple[exp.Expr, list[str]] | None:
    """The generator call ``column`` reads and the names of the columns it makes."""
    if not column.table:
        return None
    here: Scope | None = scope
    while here is not None:
        source = here.sources.get(column.table)
        if source is not None:
            break
        here = here.parent
    if not isinstance(source, Scope):
        return None
    made = source.expression
    if isinstance(made, exp.Lateral):
        return made.this, [n.lower() for n in made.alias_column_names]
    if not isinstance(made, exp.Select):
        return None
    for item in made.expressions:
        if isinstance(item, exp.Aliases):
            names = [n.name.lower() for n in item.expressions]
            if column.name.lower() in names:
                return item.this, names
    return None
