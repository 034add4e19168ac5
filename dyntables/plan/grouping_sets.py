"""ROLLUP, CUBE and GROUPING SETS as a UNION ALL of plain GROUP BYs, one per set.

Pure sqlglot: a qualified SELECT in, one SELECT per grouping set out, which the builder
compiles like any other (each keeps its own aggregate state) and unites.

What Spark computes for a set S (``Expand`` then ``Aggregate``): rows grouped by S, the
grouping keys outside S shown as NULL, aggregates over the rows' own values (``SUM(k)``
sums k even in the rows where k shows NULL), ``GROUPING(k)`` 1 when k is outside S, and
``GROUPING_ID(k1, ..., kn)`` those bits read as a number, k1 the highest. Every set is
grouped by at least the set's id, so even the empty set ``()`` yields no row over no
rows; here it is grouped by a constant, which does the same.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from dyntables.plan.calls import is_aggregate_call, own_nodes

# a constant to group the empty set by: no row over no rows, one row otherwise (a string,
# never read as a position in the select list)
EMPTY_SET_KEY = "()"
# beyond this many sets a query is recomputed instead (CUBE of n keys has 2^n sets, each
# a GROUP BY with state of its own)
MAX_SETS = 32


class Unsupported(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def expand(group: exp.Group) -> tuple[list[list[exp.Expr]], list[exp.Expr]] | None:
    """The grouping sets of ``group`` and all its keys in order (what ``GROUPING_ID()``
    counts over); None for a plain GROUP BY."""
    items = list(group.expressions)
    if group.args.get("totals"):
        raise Unsupported("WITH TOTALS")
    if group.args.get("rollup") or group.args.get("cube"):  # GROUP BY a, b WITH ROLLUP
        kind = exp.Rollup if group.args.get("rollup") else exp.Cube
        items = [kind(expressions=items)]
    if not any(isinstance(i, (exp.Rollup, exp.Cube, exp.GroupingSets)) for i in items):
        return None
    choices = [_alternatives(i) for i in items]
    sets: list[list[exp.Expr]] = []
    for combination in itertools.product(*choices):
        keys: list[exp.Expr] = []
        for part in combination:
            keys.extend(k for k in part if k not in keys)
        sets.append(keys)
        if len(sets) > MAX_SETS:
            raise Unsupported(f"more than {MAX_SETS} grouping sets")
    # a set named twice (GROUPING SETS ((a), (a)), or GROUP BY a, ROLLUP(a)) shows its
    # rows twice in Spark too: a union keeps both
    everything: list[exp.Expr] = []
    for choice in choices:
        for part in choice:
            everything.extend(k for k in part if k not in everything)
    return sets, everything


def _alternatives(item: exp.Expr) -> list[list[exp.Expr]]:
    """The sets one GROUP BY item contributes, one of which each grouping set takes."""
    if isinstance(item, exp.Rollup):
        units = [_unit(u) for u in item.expressions]
        return [sum(units[:n], []) for n in range(len(units), -1, -1)]
    if isinstance(item, exp.Cube):
        units = [_unit(u) for u in item.expressions]
        return [
            sum((u for u, keep in zip(units, mask, strict=True) if keep), [])
            for mask in itertools.product((True, False), repeat=len(units))
        ]
    if isinstance(item, exp.GroupingSets):
        return [_unit(u) for u in item.expressions]
    return [[item.unnest()]]


def _unit(u: exp.Expr) -> list[exp.Expr]:
    """``(a, b)`` counts as one element of a ROLLUP/CUBE/GROUPING SETS; ``()`` is none."""
    if isinstance(u, (exp.Rollup, exp.Cube, exp.GroupingSets)):
        raise Unsupported("ROLLUP/CUBE/GROUPING SETS nested in another")
    if isinstance(u, exp.Tuple):
        # a key's parentheses are no part of it: ``(a - b)`` in ``(k, (a - b))`` is the
        # key ``a - b`` of the set ``((a - b))``, else a select item ``(a - b)`` was
        # NULL in that set's rows, as a key outside it
        return [e.unnest() for e in u.expressions]
    if isinstance(u, exp.Paren):
        return _unit(u.this)
    return [u]


def branch(select: exp.Select, keys: list[exp.Expr], everything: list[exp.Expr]) -> exp.Select:
    """``select`` for the grouping set ``keys``: grouped by them, the other keys NULL
    outside aggregates (but inside a key of the set), GROUPING/GROUPING_ID constant."""
    absent = [k for k in everything if k not in keys]
    # this SELECT's own: a nested query's GROUPING is of its own grouping sets
    for call in (n for n in own_nodes(select) if isinstance(n, exp.Grouping | exp.GroupingId)):
        if any(arg.unnest() not in [k.unnest() for k in everything] for arg in call.expressions):
            raise Unsupported(f"{call.sql('spark')} names a column it is not grouped by")

    def replaced(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Grouping):
            return _bits(n.expressions, absent, "TINYINT")
        if isinstance(n, exp.GroupingId):
            return _bits(n.expressions or everything, absent, "BIGINT")
        if n in absent:
            return _null_of(n)
        return n

    def visit(e: exp.Expr) -> exp.Expr:
        out = replaced(e)
        if out is not e:
            return out
        # a key of this set is its grouped value whole, as Spark matches a select item
        # to a grouping expression before its parts: ``coalesce(k, 0)`` in the set
        # ``(coalesce(k, 0))`` is not coalesce(NULL, 0) where k is outside the set
        if e in keys:
            return e
        # an aggregate reads the rows' own values; MEAN, TRY_SUM, EVERY, ... are
        # aggregates sqlglot reads as plain calls
        if is_aggregate_call(e) or isinstance(e, (exp.Subquery, exp.Query)):
            return e
        if isinstance(e, exp.Filter) and is_aggregate_call(e.this):
            return e
        for child in list(e.iter_expressions()):
            new = visit(child)
            if new is not child:
                child.replace(new)
        return e

    out = select.copy()
    out.set("expressions", [visit(e) for e in out.expressions])
    having = out.args.get("having")
    if having is not None:
        having.set("this", visit(having.this))
    group_by = [k.copy() for k in keys] or [exp.Literal.string(EMPTY_SET_KEY)]
    out.set("group", exp.Group(expressions=group_by))
    out.set("order", None)
    return out


def _null_of(key: exp.Expr) -> exp.Expr:
    """The NULL an absent key shows: of the key's type when the key is a column, whose
    type the query's schema gives (an expression's sqlglot infers, sometimes otherwise
    than Spark). A function over it needs its type: ``array_sort(NULL)`` does not
    resolve, and ``coalesce(d, 0)`` of a DECIMAL(10,2) d is ``0.00``, not ``0``."""
    kind = key.type
    if (
        not isinstance(key, exp.Column)
        or kind is None
        or kind.is_type(exp.DType.UNKNOWN, exp.DType.NULL)
    ):
        return exp.null()
    return exp.cast(exp.null(), kind.copy())


def _bits(args: list[exp.Expr], absent: list[exp.Expr], type_sql: str) -> exp.Expr:
    value = 0
    for arg in args:
        # GROUPING((k + 1)) of the key k + 1, GROUPING(k + 1) of GROUPING SETS (((k + 1)))
        value = value * 2 + (1 if arg.unnest() in [k.unnest() for k in absent] else 0)
    return exp.cast(exp.Literal.number(value), type_sql)


# the alias of the grouping sets' rows under the SELECT that applies windows and DISTINCT
# over them, and the prefix of the columns it reads there
ROWS_ALIAS = "_gs"


def over_rows(select: exp.Select, everything: list[exp.Expr]) -> exp.Select | None:
    """A SELECT whose window functions or DISTINCT apply to the rows of all its grouping
    sets together, as Spark applies them after ``Expand`` and ``Aggregate``: rewritten as
    ``SELECT [DISTINCT] ... FROM (<the grouping sets' rows>) _gs``, every part of a
    window that reads the groups (an aggregate, a key, GROUPING(k)) a column of the rows
    below, a literal too where it is a key (``everything``: NULL in a set without it).
    None when there is nothing to apply on top."""
    if not select.args.get("distinct") and not any(e.find(exp.Window) for e in select.expressions):
        return None
    lifted: list[exp.Expr] = []

    def lift(e: exp.Expr) -> exp.Expr:
        """``e`` read from the rows below: a column there named ``_gs<n>``."""
        name = f"{ROWS_ALIAS}{len(lifted)}"
        lifted.append(exp.alias_(e.copy(), name))
        return exp.column(name, ROWS_ALIAS)

    def kept(e: exp.Expr) -> bool:
        literal = isinstance(e, exp.Literal | exp.Star | exp.Null | exp.Boolean)
        return literal and e not in everything

    def constant(e: exp.Expr) -> bool:
        """An expression of literals alone, which Spark requires of some of a window
        function's arguments (LAG's offset ``-1``, NTILE's buckets, PERCENTILE's array)
        and refuses as a column of the rows below (helper-31)."""
        reads = exp.Column | exp.Star | exp.Table | exp.Query | exp.Subquery | exp.Window
        return not any(
            isinstance(n, reads | exp.Grouping | exp.GroupingId) or is_aggregate_call(n)
            for n in e.walk()
        )

    def over(e: exp.Expr) -> exp.Expr:
        if isinstance(e, exp.Window):
            call = e.this.this if isinstance(e.this, exp.IgnoreNulls | exp.RespectNulls) else e.this
            for arg in list(call.iter_expressions()):
                if not (kept(arg) or constant(arg)):
                    arg.replace(lift(arg))
            for part in e.args.get("partition_by") or []:
                if not kept(part):
                    part.replace(lift(part))
            order = e.args.get("order")
            for ordered in order.expressions if order is not None else []:
                if not kept(ordered.this):
                    ordered.set("this", lift(ordered.this))
            return e
        if not e.find(exp.Window):
            return e if kept(e) else lift(e)
        for child in list(e.iter_expressions()):
            new = over(child)
            if new is not child:
                child.replace(new)
        return e

    items = []
    for item in select.expressions:
        value = item.unalias() if isinstance(item, exp.Alias) else item
        items.append(exp.alias_(over(value.copy()), item.alias_or_name))
    rows = select.copy()
    rows.set("expressions", lifted)
    rows.set("distinct", None)
    rows.set("order", None)
    outer = exp.select(*items).from_(rows.subquery(ROWS_ALIAS))
    if select.args.get("distinct"):
        outer.set("distinct", exp.Distinct())
    return outer
