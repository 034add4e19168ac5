"""Generators (explode, inline, stack, ...): which calls they are, where the builder
models them, and the names Spark gives the columns of one left unnamed."""

from __future__ import annotations

from sqlglot import exp

from dyntables.plan.calls import call_name

# Spark's generators: in a SELECT list they turn one row into several, and some into
# several columns (posexplode, inline, stack, explode of a map)
GENERATORS = frozenset(
    {
        "explode",
        "explode_outer",
        "posexplode",
        "posexplode_outer",
        "inline",
        "inline_outer",
        "stack",
        "json_tuple",
        "unnest",
    }
)


def holds_generator(e: exp.Expr) -> bool:
    """Whether a generator call is anywhere in ``e``: its value is not one per row."""
    return any(call_name(n) in GENERATORS for n in e.walk())


def generates(item: exp.Expr) -> bool:
    """A SELECT item that is a generator named by its alias(es)."""
    if isinstance(item, exp.Aliases):
        return True
    return isinstance(item, exp.Alias) and call_name(item.this) in GENERATORS


def modelled_generator(n: exp.Expr) -> bool:
    """A generator (or ``AS (a, b)``) where the compiler models it: the call of a
    LATERAL VIEW, or a named item of a SELECT list (Spark's default names for an unnamed
    one are given by :func:`spark_names` once the query is typed)."""
    parent = n.parent
    if isinstance(parent, exp.Lateral) and n.arg_key == "this":
        return bool(parent.args.get("view"))
    if isinstance(parent, exp.Alias | exp.Aliases) and n.arg_key == "this":
        n, parent = parent, parent.parent  # the generator named: where is its name?
    named = isinstance(n, exp.Alias | exp.Aliases)
    return named and isinstance(parent, exp.Select) and n.arg_key == "expressions"


# marks (in a node's meta, which sqlglot's qualification keeps) a generator of a SELECT
# list the query left unnamed, and named as Spark would (see mark_unnamed)
UNNAMED = "dyntables.unnamed_generator"


def mark_unnamed(tree: exp.Query) -> exp.Query:
    """Each generator that is an item of a SELECT list as it is, unnamed, given the names
    Spark gives its columns where they do not depend on its argument's type (``col``
    for explode, ``pos`` and ``col`` for posexplode, as over an array; ``col0``... for
    stack, ``c0``... for json_tuple) or a placeholder (inline: its struct's fields), so
    that the rest of the query can read them by name; :func:`name_unnamed` checks them
    once the query is typed."""
    count = 0
    for select in list(tree.find_all(exp.Select)):
        items = list(select.expressions)
        unnamed = [i for i, item in enumerate(items) if call_name(item) in GENERATORS]
        for i in unnamed:
            names = _untyped_names(items[i]) or [f"__dyntables_generated_{count}"]
            items[i] = _named(items[i].copy(), names)
            items[i].meta[UNNAMED] = True
            count += 1
        if unnamed:
            select.set("expressions", items)
    return tree


def name_unnamed(tree: exp.Expr) -> list[str]:
    """The typed query's unnamed generators (see mark_unnamed) under Spark's names for
    their columns; returns the ones it could not name. A name given
    before typing that proves wrong (explode of a map makes ``key`` and ``value``) is
    corrected only where no column of the query has that name: a reader would have been
    bound to it."""
    read = {c.name for c in tree.find_all(exp.Column)}
    left: list[str] = []
    for node in list(tree.find_all(exp.Alias, exp.Aliases)):
        if not node.meta.get(UNNAMED):
            continue
        given = [node.alias] if isinstance(node, exp.Alias) else [e.name for e in node.expressions]
        names = spark_names(node.this)
        if names == given:
            continue
        if names is None or read & set(given):
            left.append(call_name(node.this))
            continue
        node.replace(_named(node.this.copy(), names))
    return left


def _named(call: exp.Expr, names: list[str]) -> exp.Expr:
    if len(names) == 1:
        return exp.alias_(call, names[0])
    return exp.Aliases(this=call, expressions=[exp.to_identifier(n) for n in names])


def _untyped_names(call: exp.Expr) -> list[str] | None:
    """Spark's names for ``call``'s columns as far as they do not depend on types."""
    name = call_name(call)
    if name in ("explode", "explode_outer"):
        return ["col"]
    if name in ("posexplode", "posexplode_outer"):
        return ["pos", "col"]
    if name in ("stack", "json_tuple"):
        return spark_names(call)
    return None


def spark_names(call: exp.Expr) -> list[str] | None:
    """The names Spark 3.5 gives the columns of ``call``, an unnamed generator of a SELECT
    list (None when the typed query does not tell)."""
    name = call_name(call)
    if name == "json_tuple":
        args = _arguments(call)
        return [f"c{i}" for i in range(len(args) - 1)] if len(args) > 1 else None
    if name == "stack":
        width = _stack_width(call)
        return None if width is None else [f"col{i}" for i in range(width)]
    columns = _collection_columns(call)
    return None if columns is None else [n for n, _ in columns]


def generated_types(call: exp.Expr) -> list[exp.DataType] | None:
    """The types Spark 3.5 gives the columns ``call`` makes, from its typed argument
    (None when that does not tell)."""
    name = call_name(call)
    if name == "json_tuple":
        args = _arguments(call)
        return [exp.DataType.build("string")] * (len(args) - 1) if len(args) > 1 else None
    if name == "stack":
        return _stacked_types(call)
    columns = _collection_columns(call)
    if columns is None or not all(isinstance(t, exp.DataType) for _, t in columns):
        return None
    return [t.copy() for _, t in columns if t is not None]


def _arguments(call: exp.Expr) -> list[exp.Expr]:
    if isinstance(call, exp.Stack):
        return [call.this, *call.expressions]
    return list(call.expressions)


def _stack_width(call: exp.Expr) -> int | None:
    """``stack(n, a1, ..., ak)``'s number of columns, ceil(k / n)."""
    rows, *args = _arguments(call)
    if not (isinstance(rows, exp.Literal) and rows.is_int and int(rows.name) > 0):
        return None
    return -(-len(args) // int(rows.name))


def _stacked_types(call: exp.Expr) -> list[exp.DataType] | None:
    """Column j of a stack holds a(j), a(j + w), ...; Spark wants one type in each
    column beside NULLs, and gives that type."""
    width = _stack_width(call)
    args = _arguments(call)[1:]
    if width is None or not args:
        return None
    out: list[exp.DataType] = []
    for j in range(width):
        # alike as Spark spells them (sqlglot's VARCHAR literal beside a STRING column)
        kinds = {
            a.type.sql("spark")
            for a in args[j::width]
            if isinstance(a.type, exp.DataType) and not a.is_type(exp.DataType.Type.NULL)
        }
        if len(kinds) != 1 or "UNKNOWN" in kinds:
            return None
        out.append(exp.DataType.build(kinds.pop(), dialect="spark"))
    return out


def _collection_columns(call: exp.Expr) -> list[tuple[str, exp.DataType | None]] | None:
    """(name, type) of each column an explode, posexplode or inline makes, by its
    argument's type (a type None where the argument's element is untyped)."""
    name = call_name(call)
    arg = call.expressions[0] if isinstance(call, exp.Anonymous) and call.expressions else call.this
    typ = getattr(arg, "type", None)
    if not isinstance(typ, exp.DataType):
        return None
    parts = [t if isinstance(t, exp.DataType) else None for t in typ.expressions]
    if name in ("explode", "explode_outer", "posexplode", "posexplode_outer"):
        pos: list[tuple[str, exp.DataType | None]] = (
            [("pos", exp.DataType.build("int"))] if name.startswith("pos") else []
        )
        if typ.is_type(exp.DataType.Type.ARRAY):
            return [*pos, ("col", parts[0] if len(parts) == 1 else None)]
        if typ.is_type(exp.DataType.Type.MAP):
            key, value = parts if len(parts) == 2 else (None, None)
            return [*pos, ("key", key), ("value", value)]
        return None
    if name in ("inline", "inline_outer") and typ.is_type(exp.DataType.Type.ARRAY):
        element = parts[0] if parts else None
        if isinstance(element, exp.DataType) and element.is_type(exp.DataType.Type.STRUCT):
            fields = [f for f in element.expressions if isinstance(f, exp.ColumnDef)]
            if fields and len(fields) == len(element.expressions) and all(f.name for f in fields):
                return [(f.name, _kind(f)) for f in fields]
    return None


def _kind(field: exp.ColumnDef) -> exp.DataType | None:
    kind = field.args.get("kind")
    return kind if isinstance(kind, exp.DataType) else None
