"""Subqueries in expressions, rewritten into joins the delta rules already maintain.

Pure sqlglot: these functions take and return (qualified) syntax trees; the builder
turns what they return into operators.

A scalar subquery that aggregates its FROM clause is a join (Spark's optimizer does
the same, ``RewriteCorrelatedScalarSubquery``):

* uncorrelated, ``x > (SELECT AVG(y) FROM s)``: a global aggregate has exactly one row,
  even over no rows, so the outer rows are cross-joined with it, one for one;
* correlated by equalities, ``(SELECT SUM(y) FROM s WHERE s.k = t.k AND s.z > 0)``: the
  aggregate grouped by the inner side of the equalities, LEFT-joined on them. A group
  exists for each key with rows, so an outer row meets at most one; an outer row that
  meets none (no rows, or a NULL key, which equals nothing) gets the aggregate over no
  rows: COUNT is 0 there, COLLECT_LIST and COLLECT_SET an empty list, every other
  aggregate NULL (the "COUNT bug" of naive decorrelation), told apart by a COUNT(*) that
  is never NULL in a group that exists. Those NULLs and empty lists are read from the
  aggregates' own columns of the join, which are NULL there: a function over them needs
  their type (``array_sort(NULL)`` does not resolve; ``coalesce(SUM(d), 0)`` over no
  rows is ``0.00`` for a DECIMAL d, not ``0``).
* correlated by more than equalities, ``(SELECT SUM(y) FROM s WHERE s.k = t.k AND
  s.ts <= t.ts)``: the same, grouped by the distinct values of the outer columns the
  correlation reads, joined with s on it (``_join_by_outer_values``).

``x NOT IN (SELECT y FROM s)`` keeps a row when s is empty, or when x is not NULL, no y
equals it and no y is NULL (a NULL anywhere makes the comparison unknown). As two anti
joins: on ``x = y`` (a NULL x matches nothing there), then on ``(x IS NULL) = k`` with
the rows ``k = TRUE`` for every row of s (an x that is NULL goes as soon as s has a row)
and ``k = FALSE`` for every NULL y (an x that is not NULL goes when s holds a NULL).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from dyntables.plan.calls import COUNTS, call_name, is_aggregate_call
from dyntables.plan.generators import holds_generator

# the alias the builder gives a scalar subquery's columns in the outer scope; never a
# table alias of the user's (sqlglot's qualify names sources after their tables)
SUBQUERY_ALIAS = "__dyntables_sq"
KEY = "__k"
# the distinct outer values a subquery correlated by more than equalities is joined with
VALUES_ALIAS = "__dyntables_outer"
VALUE = "v"
MARKER = "n"
# the body's columns after the marker: the aggregates the value over no rows reads, as
# columns of this placeholder table until the builder names the join (``valued``)
AGGREGATE = "a"
EMPTY_OF = "__dyntables_empty"
# aggregates whose value over no rows is an empty list
COLLECTIONS = (exp.ArrayAgg, exp.ArrayUniqueAgg)
# aggregates whose value over no rows is neither NULL, 0 nor an empty list
_OTHER_OVER_NO_ROWS = frozenset(
    {"count_min_sketch", "hll_sketch_agg", "hll_union_agg", "bitmap_construct_agg", "bitmap_or_agg"}
)


class Unsupported(Exception):
    """A subquery outside these rewrites; ``code`` is the FULL reason code."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class ScalarJoin:
    """A scalar subquery as a join: ``body`` is the query to join (its first
    ``len(outer_keys)`` columns the keys, then the value, then, when ``empty`` is not
    None, the marker and the ``typed`` aggregates ``empty`` reads); ``empty`` is the value
    over no rows (correlated only)."""

    body: exp.Select
    outer_keys: tuple[exp.Expr, ...]
    empty: exp.Expr | None
    typed: int = 0
    # the keys meet as ``<=>`` does, NULL equal to NULL (see _join_by_outer_values)
    null_safe: bool = False


def scalar_subqueries(root: exp.Expr) -> Iterator[exp.Subquery]:
    """The scalar subqueries of one clause, not those of nested queries, nor the query of
    an ``IN (subquery)`` (a semi join of its own)."""
    stack = [root]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Subquery):
            if not (isinstance(n.parent, exp.In) and n.arg_key == "query"):
                yield n
            continue
        if isinstance(n, exp.Query) and n is not root:
            continue
        stack.extend(n.iter_expressions())


def scalar_join(
    query: exp.Expr, outer_aliases: set[str], aggregates: bool, outer: exp.Select
) -> ScalarJoin:
    """``query`` (a scalar subquery's body) as a join; ``outer_aliases``: the table
    aliases of the enclosing SELECT, ``outer``; ``aggregates``: whether its one expression
    is an aggregate of this SELECT (the builder knows which calls are aggregates)."""
    if not isinstance(query, exp.Select):
        raise Unsupported("SUBQUERY_EXPRESSION", "a scalar subquery that is a set operation")
    if len(query.expressions) != 1 or not aggregates:
        raise Unsupported(
            "SUBQUERY_EXPRESSION",
            "a scalar subquery is maintained when it is one aggregate over its FROM "
            "(such as (SELECT SUM(x) FROM t WHERE t.k = outer.k)); this one may return "
            "other than one row",
        )
    for clause in ("group", "having", "limit", "offset", "distinct", "qualify", "with_", "with"):
        if query.args.get(clause):
            raise Unsupported(
                "SUBQUERY_EXPRESSION",
                f"a scalar subquery with {clause.rstrip('_').upper()} may return other than one row",
            )
    if any(True for _ in query.expressions[0].find_all(exp.Window)):
        raise Unsupported("SUBQUERY_EXPRESSION", "a window function in a scalar subquery")
    inner = _inner_aliases(query)
    value = query.expressions[0].unalias()
    if _outer_columns(value, outer_aliases, inner):
        raise Unsupported(
            "CORRELATED_NON_EQUI",
            "a scalar subquery whose value reads the outer query (only its WHERE may)",
        )
    where = query.args.get("where")
    local: list[exp.Expr] = []
    inner_keys: list[exp.Expr] = []
    outer_keys: list[exp.Expr] = []
    for conj in conjuncts(where.this if where is not None else None):
        if not _outer_columns(conj, outer_aliases, inner):
            local.append(conj)
            continue
        pair = _correlation(conj, outer_aliases, inner)
        if pair is None:
            return _join_by_outer_values(query, outer_aliases, inner, outer)
        inner_keys.append(pair[0])
        outer_keys.append(pair[1])
    differ = keys_differ(list(zip(outer_keys, inner_keys, strict=True)), by_value=True)
    if differ is not None:  # one group per inner key value must meet one outer value
        raise Unsupported("KEY_TYPES", differ)
    body = query.copy()
    items: list[exp.Expr] = [exp.alias_(k.copy(), f"{KEY}{i}") for i, k in enumerate(inner_keys)]
    items.append(exp.alias_(value.copy(), VALUE))
    empty, typed = empty_value(value) if inner_keys else (None, [])
    items.extend(_empty_columns(empty, typed))
    body.set("expressions", items)
    body.set("where", exp.Where(this=exp.and_(*local)) if local else None)
    body.set("order", None)
    if inner_keys:
        body.set("group", exp.Group(expressions=[k.copy() for k in inner_keys]))
    return ScalarJoin(body, tuple(outer_keys), empty, len(typed))


def first_by_order(query: exp.Expr) -> exp.Expr:
    """``(SELECT s.v FROM s WHERE <filter> ORDER BY s.ts DESC LIMIT 1)``, the value of
    the first row in an order (the latest rate, the top seller), as an aggregate
    :func:`scalar_join` keeps: the rows ranked by the order and the first one's value
    picked (``MAX_BY`` over that one row, which takes any type)::

        SELECT MAX_BY(r.v, r.rn) FROM (SELECT s.v AS v, ROW_NUMBER() OVER (ORDER BY
          s.ts DESC) AS rn FROM s WHERE <filter>) AS r WHERE r.rn = 1

    No row is NULL either way. Rows tied in the order are ranked by their other columns
    (as every ROW_NUMBER the builder keeps): one of the rows LIMIT 1 could give, the same
    at every refresh. ``query`` is returned as it is where this does not hold: not one
    column, GROUP BY, DISTINCT, an OFFSET, a value that is an aggregate, a window or a
    generator, an order by a bare name or position (the select list's?), or any reference
    to the outer query, which Spark 3.5 refuses beside a LIMIT anyway."""
    if not isinstance(query, exp.Select) or query.args.get("order") is None:
        return query
    limit = query.args.get("limit")
    count = limit.args.get("expression") if limit is not None else None
    if not (isinstance(count, exp.Literal) and not count.is_string and count.this == "1"):
        return query
    if len(query.expressions) != 1 or any(
        query.args.get(c)
        for c in ("group", "having", "offset", "distinct", "qualify", "with_", "with")
    ):
        return query
    inner = _inner_aliases(query)
    value = query.expressions[0].unalias()
    keys = [o.this for o in query.args["order"].expressions]
    if (
        any(c.table and c.table.lower() not in inner for c in query.find_all(exp.Column))
        or value.find(exp.Window)
        or holds_generator(value)
        or any(is_aggregate_call(n) for n in value.walk())
        or any(isinstance(k, exp.Literal) for k in keys)
        or any(not c.table for k in keys for c in k.find_all(exp.Column))
    ):
        return query
    rank = exp.Window(this=exp.RowNumber(), order=query.args["order"].copy())
    rows = query.copy()
    rows.set("expressions", [exp.alias_(value.copy(), VALUE), exp.alias_(rank, _RANK)])
    for clause in ("order", "limit"):
        rows.set(clause, None)
    ranked = exp.column(VALUE, table=_RANKED)
    ranked.type = value.type
    number = exp.column(_RANK, table=_RANKED)
    return (
        exp.select(exp.alias_(exp.ArgMax(this=ranked, expression=number), VALUE))
        .from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(_RANKED))))
        .where(exp.EQ(this=number.copy(), expression=exp.Literal.number(1)))
    )


_RANKED = "__dyntables_first"
_RANK = "__rn"


def _join_by_outer_values(
    query: exp.Select, outer_aliases: set[str], inner: set[str], outer: exp.Select
) -> ScalarJoin:
    """A subquery correlated by more than equalities (``s.ts <= t.ts``, ``s.k <=> t.k``)
    has no inner key to group by: its value is a function of the outer columns it reads.
    So those columns' distinct values (from the outer FROM clause, a superset of the rows
    that ask) are joined with the subquery's FROM on its correlation, and the value is
    aggregated per distinct value; the outer rows LEFT-join that on their values, NULL
    equal to NULL (a correlation may hold for a NULL, as ``<=>`` does). A value no inner
    row meets has no group, and the outer row gets the value over no rows, as in the
    equality case. A change of the subquery's table re-joins it with every distinct
    value its condition can meet; a new outer value is joined with the subquery's table."""
    from_ = outer.args.get("from_") or outer.args.get("from")
    assert from_ is not None  # the builder refuses a SELECT without FROM before this
    joins = outer.args.get("joins") or []
    named = {s.this.alias_or_name.lower() for s in [from_, *joins]}
    columns: dict[tuple[str, str], exp.Column] = {}
    where = query.args.get("where")
    assert where is not None  # only a correlation outside the equalities leads here
    for c in _outer_columns(where, outer_aliases, inner):
        columns.setdefault((c.table.lower(), c.name.lower()), c)
    foreign = [c for (t, _), c in columns.items() if t not in named]
    if foreign:
        raise Unsupported(
            "CORRELATED_NON_EQUI",
            f"a scalar subquery correlated by more than equalities reads "
            f"{foreign[0].sql('spark')}, which is not a column of the outer FROM clause's "
            "tables",
        )
    names = {k: f"{KEY}{i}" for i, k in enumerate(columns)}
    values = (
        exp.select(*(exp.alias_(c.copy(), names[k]) for k, c in columns.items()))
        .from_(from_.this.copy())
        .distinct()
    )
    values.set("joins", [j.copy() for j in joins])
    body = query.copy()
    for c in list(body.find_all(exp.Column)):
        key = (c.table.lower(), c.name.lower())
        if key in names and c.table.lower() not in inner:
            typed = exp.column(names[key], table=VALUES_ALIAS)
            typed.type = c.type
            c.replace(typed)
    local: list[exp.Expr] = []
    correlation: list[exp.Expr] = []
    body_where = body.args.get("where")
    for conj in conjuncts(body_where.this if body_where is not None else None):
        seen = any(t.table == VALUES_ALIAS for t in conj.find_all(exp.Column))
        (correlation if seen else local).append(conj)
    joined = exp.Join(
        this=exp.Subquery(this=values, alias=exp.TableAlias(this=exp.to_identifier(VALUES_ALIAS))),
        on=exp.and_(*correlation),
    )
    body.set("joins", [*(body.args.get("joins") or []), joined])
    keys = [exp.column(names[k], table=VALUES_ALIAS) for k in columns]
    value = body.expressions[0].unalias()
    empty, read = empty_value(value)
    items: list[exp.Expr] = [exp.alias_(k.copy(), k.name) for k in keys]
    items.append(exp.alias_(value.copy(), VALUE))
    items.extend(_empty_columns(empty, read))
    body.set("expressions", items)
    body.set("where", exp.Where(this=exp.and_(*local)) if local else None)
    body.set("order", None)
    body.set("group", exp.Group(expressions=keys))
    return ScalarJoin(
        body, tuple(c.copy() for c in columns.values()), empty, len(read), null_safe=True
    )


def empty_value(value: exp.Expr) -> tuple[exp.Expr | None, list[exp.Expr]]:
    """``value`` over no rows, and the aggregates it reads as columns of ``EMPTY_OF``
    (``AGGREGATE`` and their position): a count is 0, a COLLECT_LIST or COLLECT_SET an
    empty list, any other aggregate (also those sqlglot reads as plain calls, such as
    TRY_SUM) its own column, which is NULL, of its type, where no group was found. None
    when that is the bare aggregate's NULL, which the LEFT join gives anyway."""
    typed: list[exp.Expr] = []

    def replaced(n: exp.Expr) -> exp.Expr:
        agg = n.this if isinstance(n, exp.Filter) else n
        if not is_aggregate_call(agg):
            return n
        if isinstance(agg, COUNTS):
            return exp.cast(exp.Literal.number(0), exp.DataType.build("bigint"))
        if call_name(agg) in _OTHER_OVER_NO_ROWS:
            raise Unsupported(
                "SUBQUERY_EXPRESSION",
                f"a correlated scalar subquery of {call_name(agg).upper()}, whose value over "
                "no rows is not NULL",
            )
        column = exp.column(f"{AGGREGATE}{len(typed)}", table=EMPTY_OF)
        typed.append(n.copy())
        if isinstance(agg, COLLECTIONS):
            return exp.func("coalesce", column, exp.Array())
        return column

    empty = value.transform(replaced)  # replaced nodes are not descended into
    if isinstance(empty, exp.Column) and empty.table == EMPTY_OF:
        return None, []
    return empty, typed


def _empty_columns(empty: exp.Expr | None, typed: list[exp.Expr]) -> list[exp.Expr]:
    """The body's columns after its value that tell and give its value over no rows:
    the marker, a COUNT(*) never NULL where a group exists, and the aggregates."""
    if empty is None:
        return []
    marker = exp.alias_(exp.Count(this=exp.Star()), MARKER)
    return [marker, *(exp.alias_(a, f"{AGGREGATE}{i}") for i, a in enumerate(typed))]


def valued(alias: str, empty: exp.Expr | None) -> exp.Expr:
    """What replaces the subquery in the outer query: its value column, or the value
    over no rows where the LEFT join found no group (the marker is NULL)."""
    value = exp.column(VALUE, table=alias)
    if empty is None:
        return value
    missing = exp.Is(this=exp.column(MARKER, table=alias), expression=exp.null())
    over_none = empty.copy()
    for c in list(over_none.find_all(exp.Column)):
        if c.table == EMPTY_OF:
            c.replace(exp.column(c.name, table=alias))
    return exp.case().when(missing, over_none).else_(value)


def null_killers(query: exp.Expr) -> exp.Query:
    """The rows that remove an outer row a NOT IN's equality let through, keyed by
    whether that row's value is NULL: ``TRUE`` once per row of the subquery (a NULL x
    goes when there is any), ``FALSE`` once per NULL it returns (every x goes). The
    subquery's one column is read by the name its first branch gives it (a set
    operation's column is named there), so a branch's own ORDER BY still finds it."""
    inner = query.copy()
    inner.set("order", None)
    name = branches(inner)[0].expressions[0].alias_or_name
    assert name, "qualify names every column of the query"
    value = exp.column(exp.to_identifier(name, quoted=True), table="_v")

    def over_rows(key: exp.Expr) -> exp.Select:
        source = exp.alias_(exp.Subquery(this=inner.copy()), "_v", table=True)
        return exp.select(exp.alias_(key, "k")).from_(source)

    nulls = over_rows(exp.false()).where(exp.Is(this=value, expression=exp.null()))
    return exp.union(over_rows(exp.true()), nulls, distinct=False)


def keys_differ(pairs: list[tuple[exp.Expr, exp.Expr]], by_value: bool) -> str | None:
    """Why the key pairs ``(a, b)`` of a join (or IN, EXISTS, a correlation) cannot be
    kept as the rules keep them, or None. Types come from sqlglot's annotation of the
    qualified query; a side it cannot type is not taken on trust.

    ``by_value``: the rule keeps state per key value (whether a key has a match, one
    group per correlation key), which needs distinct values of one side never to equal
    one value of the other: the same family of types, or integers beside decimals. A
    STRING beside a number ('1' and '01' both equal 1), or a BIGINT beside a DOUBLE
    (2^53 and 2^53 + 1 both equal 2^53 as doubles), would not. Otherwise (an inner
    join, joined row by row) the sides need only be ordered alike, since a large side
    is read within the other side's key range: no string beside a number or a date."""
    for a, b in pairs:
        fa, fb = _family(a), _family(b)
        if fa is None or fb is None:
            shown = a if fa is None else b
            return f"cannot tell the type of {shown.sql('spark')[:60]}; recomputed"
        if by_value and _zone_meets_no_zone(a, b):
            return (
                f"{a.sql('spark')[:40]} and {b.sql('spark')[:40]} compare a TIMESTAMP with a "
                "TIMESTAMP_NTZ in the session's time zone, where two local times can be one "
                "instant (a daylight-saving gap); cast one side to the other's type"
            )
        if "null" in (fa, fb) or fa == fb:
            continue
        exact = {"integer", "decimal"}
        if by_value and {fa, fb} <= exact:
            continue
        if not by_value and {fa, fb} <= exact | {"floating"}:
            continue
        return (
            f"{a.sql('spark')[:40]} ({fa}) is compared with {b.sql('spark')[:40]} ({fb}): "
            f"{'several values of one equal one value of the other' if by_value else 'they order differently'}; "
            "cast one side to the other's type"
        )
    return None


def in_pairs(outer: list[exp.Expr], query: exp.Expr) -> list[tuple[exp.Expr, exp.Expr]] | None:
    """(outer value, subquery column) pairs of ``(outer) IN (query)``, every branch of a
    set operation; None when the column counts differ (the builder says so)."""
    pairs = []
    for branch in branches(query):
        if len(branch.expressions) != len(outer):
            return None
        pairs += [(v, e.unalias()) for v, e in zip(outer, branch.expressions, strict=True)]
    return pairs


def branches(query: exp.Expr) -> list[exp.Select]:
    """The SELECTs of a query, every branch of a set operation."""
    if isinstance(query, exp.Subquery):
        return branches(query.this)
    if isinstance(query, exp.SetOperation):
        return branches(query.left) + branches(query.right)
    return [query] if isinstance(query, exp.Select) else []


def folds_to_null(values: list[exp.Expr]) -> bool:
    """A value compared by IN or NOT IN that Spark's optimizer may fold to a NULL literal
    (``CAST(NULL AS INT)``, ``k + NULL``): Spark then answers NULL before reading the
    subquery, where its join gives FALSE (or, for NOT IN over no rows, TRUE)."""
    return any(True for v in values for _ in v.find_all(exp.Null))


def in_parts(node: exp.In) -> tuple[list[exp.Expr], exp.Expr]:
    """``(a, b) IN (query)``: the values compared (one, or a tuple's) and the query."""
    query = node.args["query"]
    values = node.this.expressions if isinstance(node.this, exp.Tuple) else [node.this]
    return list(values), query.this if isinstance(query, exp.Subquery) else query


def null_safe_keys(a: exp.Expr, b: exp.Expr) -> list[tuple[exp.Expr, exp.Expr]] | None:
    """``a <=> b`` as equalities of values that are never NULL: whether each side is
    NULL, and each side with NULL replaced by one value of its own type. The join rules
    key by values a NULL never equals (a NULL key joins nothing there); these keys match
    exactly the rows ``<=>`` matches. None when a side's type cannot be told."""
    defaults = [_non_null(e) for e in (a, b)]
    if defaults[0] is None or defaults[1] is None:
        return None
    is_null = [exp.paren(exp.Is(this=e.copy(), expression=exp.null())) for e in (a, b)]
    filled = [exp.func("coalesce", e.copy(), d) for e, d in zip((a, b), defaults, strict=True)]
    return [(is_null[0], is_null[1]), (filled[0], filled[1])]


def _non_null(e: exp.Expr) -> exp.Expr | None:
    """A value of ``e``'s type to stand for its NULL (any one: the NULL-ness is a key of
    its own)."""
    family = _family(e)
    if family in ("integer", "decimal", "floating"):
        return exp.Literal.number(0)
    if family == "string":
        return exp.Literal.string("")
    if family == "boolean":
        return exp.false()
    if family == "date or time" and e.type is not None:
        return exp.cast(exp.Literal.string("1970-01-01"), e.type.copy())
    return None


def _zone_meets_no_zone(a: exp.Expr, b: exp.Expr) -> bool:
    """A TIMESTAMP_NTZ beside another timestamp: Spark reads the NTZ value in the session
    time zone to compare them, and that reading is not one-to-one."""
    kinds = [e.type.this if e.type is not None else None for e in (a, b)]
    ntz = exp.DataType.Type.TIMESTAMPNTZ
    others = exp.DataType.TEMPORAL_TYPES - {ntz, exp.DataType.Type.DATE}
    return (kinds[0] == ntz and kinds[1] in others) or (kinds[1] == ntz and kinds[0] in others)


def _family(e: exp.Expr) -> str | None:
    kind = e.type.this if e.type is not None else exp.DataType.Type.UNKNOWN
    if kind == exp.DataType.Type.NULL:
        return "null"
    if kind in exp.DataType.INTEGER_TYPES:
        return "integer"
    if kind in exp.DataType.REAL_TYPES - exp.DataType.FLOAT_TYPES:
        return "decimal"
    if kind in exp.DataType.NUMERIC_TYPES:
        return "floating"
    if kind in exp.DataType.TEXT_TYPES:
        return "string"
    if kind in exp.DataType.TEMPORAL_TYPES:
        return "date or time"
    if kind == exp.DataType.Type.BOOLEAN:
        return "boolean"
    return None


def _inner_aliases(query: exp.Expr) -> set[str]:
    aliases = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    aliases |= {s.alias_or_name.lower() for s in query.find_all(exp.Subquery)}
    return aliases


def _outer_columns(e: exp.Expr, outer: set[str], inner: set[str]) -> list[exp.Column]:
    return [
        c
        for c in e.find_all(exp.Column)
        if c.table and c.table.lower() in outer and c.table.lower() not in inner
    ]


def _correlation(
    conj: exp.Expr, outer: set[str], inner: set[str]
) -> tuple[exp.Expr, exp.Expr] | None:
    """(inner side, outer side) of an equality between the two queries' columns."""
    if not isinstance(conj, exp.EQ):
        return None
    a, b = conj.this, conj.expression
    for mine, theirs in ((a, b), (b, a)):
        theirs_cols = list(theirs.find_all(exp.Column))
        mine_cols = list(mine.find_all(exp.Column))
        if (
            mine_cols
            and theirs_cols
            and not _outer_columns(mine, outer, inner)
            and len(_outer_columns(theirs, outer, inner)) == len(theirs_cols)
            and not any(True for _ in mine.find_all(exp.Subquery))
        ):
            return mine, theirs
    return None


def is_exists_subquery(e: exp.Expr) -> bool:
    """``EXISTS (SELECT ...)``, not the array function ``exists(arr, x -> ...)``, which
    sqlglot parses into the same node (read as a subquery, it made a plain per-row
    expression FULL; helper-25)."""
    return isinstance(e, exp.Exists) and isinstance(e.this, (exp.Query, exp.Subquery))


def has_subquery(e: exp.Expr) -> bool:
    return any(
        isinstance(n, exp.Subquery) or is_exists_subquery(n)
        for n in e.find_all(exp.Subquery, exp.Exists)
    )


def conjuncts(e: exp.Expr | None) -> list[exp.Expr]:
    """The parts of an AND chain (parentheses unwrapped)."""
    if e is None:
        return []
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return conjuncts(e.this)
    return [e]
