"""EXISTS and IN (subquery) as truth values outside a WHERE's top-level conjuncts (those
are semi and anti joins of their own): under OR, in a CASE condition, as a column.
Each becomes a counting scalar subquery, ``(SELECT COUNT(*) ...) > 0``, which
:mod:`.subquery` turns into a join the rules maintain: grouped by the correlation's
inner side and LEFT-joined on it, a COUNT over no rows being 0.

What such a subquery means is what Spark 3.5 answers (the oracle), which is not always
SQL's three-valued answer. Spark evaluates it as an existence join whose flag is never
NULL (``RewritePredicateSubquery``):

* ``EXISTS (...)``: whether a row exists, TRUE or FALSE in SQL as well; taken anywhere.
* ``x IN (SELECT y ...)``: whether some y equals x, FALSE where SQL says unknown (x NULL,
  or a NULL among the y). Directly under NOT, Spark's flag is null-aware: also TRUE
  where ``x = y`` is unknown (a NULL x beside any row, any x beside a NULL y), so ``NOT``
  of it is TRUE exactly where SQL's ``NOT IN`` is. Spark's optimizer first moves NOTs
  through AND and OR (so the number of NOTs above an IN decides which flag it gets) and
  turns ``= FALSE`` into a NOT. So an IN is taken where only AND, OR, NOT and
  parentheses lie between it and a WHERE, a CASE/IF condition or a select item's whole
  value; anywhere else (``coalesce(x IN (...), ...)``, ``(x IN (...)) = FALSE``) it
  stays FULL.

An IN's subquery must not refer to the outer query (its body is read as a table of its
own, ``(SELECT COUNT(*) FROM (<subquery>) WHERE v = x)``).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dyntables.plan.calls import own_nodes
from dyntables.plan.subquery import (
    VALUE,
    Unsupported,
    branches,
    conjuncts,
    in_parts,
    is_exists_subquery,
)

# the aliases of an IN's subquery (its columns named v0...) and of what its counting
# subqueries read: those columns, and _ANY_ROW under NOT
_BODY = "__dyntables_q"
_IN_ALIAS = "__dyntables_in"
# a column TRUE in every row of an IN's subquery: the rows a NULL x is matched with
_ANY_ROW = "any_row"
# the meta key that marks a counting subquery made here
_COUNTED = "dyntables_counted"
# a table alias inside an IN's subquery that the outer query also uses is renamed to this
# prefix plus a number, so the correlation's outer columns are not read as inner ones
RENAMED = "__dyntables_r"
# what an EXISTS may have for the semi join a WHERE's conjunct makes of it, which reads
# its FROM relation and WHERE alone (an ORDER BY or a hint changes no row's existence)
_SEMI_JOINED = frozenset({"expressions", "from_", "from", "where", "order", "hint"})
# what an EXISTS may have besides its FROM and WHERE without changing whether a row exists
_EXISTS_KEPT = frozenset({"expressions", "from_", "from", "joins", "laterals", "where", "hint"})
_EXISTS_DROPPED = frozenset({"order", "distinct"})


def of_clause(root: exp.Expr, handled: list[exp.Expr]) -> list[exp.Expr]:
    """The EXISTS and IN (subquery) nodes of one clause, not those of nested queries nor
    the ``handled`` ones (a WHERE's top-level conjuncts)."""
    seen = {id(n) for n in handled}
    return [
        n
        for n in own_nodes(root)
        if id(n) not in seen
        and (is_exists_subquery(n) or (isinstance(n, exp.In) and n.args.get("query") is not None))
    ]


def top_level(where: exp.Expr, plain: Callable[[exp.Expr], bool]) -> list[exp.Expr]:
    """The subqueries a WHERE joins as semi or anti joins: its conjuncts ``x IN (...)``,
    ``x NOT IN (...)``, and ``EXISTS`` and ``NOT EXISTS`` over one relation and a WHERE
    (one with a join, a LATERAL VIEW, a LIMIT, ... is counted instead). ``plain``: as
    for :func:`exists_count`."""
    out = []
    for conj in conjuncts(where):
        inner = conj.this if isinstance(conj, exp.Not) else conj
        if (is_exists_subquery(inner) and semi_joined(inner, plain)) or (
            isinstance(inner, exp.In) and inner.args.get("query") is not None
        ):
            out.append(inner)
    return out


def semi_joined(node: exp.Expr, plain: Callable[[exp.Expr], bool]) -> bool:
    """Whether the semi join of a WHERE's conjunct ``EXISTS`` reads all of it: not an
    aggregate without GROUP BY either, which has a row over no rows."""
    body = _exists_body(node)
    return (
        isinstance(body, exp.Select)
        and (body.args.get("from_") or body.args.get("from")) is not None
        and all(not v or k in _SEMI_JOINED for k, v in body.args.items())
        and all(plain(e) for e in body.expressions)
    )


def exists_count(node: exp.Exists, plain: Callable[[exp.Expr], bool]) -> exp.Expr:
    """``EXISTS (SELECT ... FROM f WHERE p)`` as ``(SELECT COUNT(*) FROM f WHERE p) > 0``.
    ``plain``: whether a select item neither aggregates nor generates rows (the builder
    knows which calls do): an aggregate without GROUP BY makes one row of none."""
    body = _exists_body(node)
    if not isinstance(body, exp.Select):
        raise Unsupported("SUBQUERY_EXPRESSION", "EXISTS over a set operation")
    if not all(plain(e) for e in body.expressions):
        raise Unsupported(
            "SUBQUERY_EXPRESSION", "EXISTS over a SELECT that aggregates or generates rows"
        )
    counted = body.copy()
    for key, value in body.args.items():
        if not value or key in _EXISTS_KEPT:
            continue
        if key in _EXISTS_DROPPED or (key == "limit" and _positive_limit(value)):
            counted.set(key, None)
            continue
        raise Unsupported(
            "SUBQUERY_EXPRESSION",
            f"EXISTS over a SELECT with {key.rstrip('_').upper()} (which may change whether "
            "it has a row)",
        )
    counted.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), VALUE)])
    return _positive(counted)


def in_count(node: exp.In, root: exp.Expr, outer_aliases: set[str]) -> exp.Expr:
    """``x IN (SELECT y ...)`` as ``(SELECT COUNT(*) FROM (SELECT y ...) AS q(v) WHERE v =
    x) > 0``, Spark's flag, or under an odd number of NOTs as Spark's null-aware flag (see
    the module's docstring); ``root``: the clause (a WHERE's condition or one select
    item) whose truth or value reads it. The builder has checked that the subquery does
    not refer to the outer query and returns one column per value."""
    negated = _negated(node, root)
    values, query = in_parts(node)
    if any(True for v in values for _ in v.find_all(exp.Subquery, exp.Exists)):
        raise Unsupported("SUBQUERY_EXPRESSION", "a subquery in the value IN compares")
    if negated and len(values) > 2:  # one count per set of columns compared: 2^n joins
        raise Unsupported(
            "SUBQUERY_EXPRESSION",
            "NOT IN (subquery) of more than two columns outside a WHERE's conjuncts",
        )
    names = [f"{VALUE}{i}" for i in range(len(values))]
    # the subquery as it is (its ORDER BY may name its own columns), its columns renamed
    # by the alias that reads it
    body = exp.Subquery(
        this=_renamed_apart(query.copy(), outer_aliases),
        alias=exp.TableAlias(
            this=exp.to_identifier(_BODY), columns=[exp.to_identifier(n) for n in names]
        ),
    )
    items = [exp.alias_(exp.column(n, table=_BODY), n) for n in names]
    if negated:
        items.append(exp.alias_(exp.true(), _ANY_ROW))
    inner = exp.select(*items).from_(body)
    columns = []
    for name, first in zip(names, branches(query)[0].expressions, strict=True):
        column = exp.column(name, table=_IN_ALIAS)
        column.type = first.unalias().type  # the family, checked for every branch, is one
        columns.append(column)
    equal = [exp.EQ(this=c, expression=v.copy()) for c, v in zip(columns, values, strict=True)]
    flag = _positive(_count(inner, *equal))
    if not negated:
        return flag
    return exp.paren(exp.or_(flag, *_null_aware(inner, values, columns)))


def _null_aware(
    inner: exp.Select, values: list[exp.Expr], columns: list[exp.Column]
) -> list[exp.Expr]:
    """NOT directly over IN: Spark's existence join matches a row where, for each
    column, ``x = y`` is TRUE or unknown (``(x = y) OR isnull(x = y)``); the plain
    flag (every column equal) is the caller's. One column: a NULL y, or a NULL x beside
    any row (counted from the rows joined on ``x IS NULL``, so a change of the
    subquery re-reads only the outer rows with a NULL x). Two: see _null_aware_pair."""
    if len(values) > 1:
        return _null_aware_pair(inner, values, columns)
    any_row = exp.column(_ANY_ROW, table=_IN_ALIAS)
    any_row.type = exp.DataType.build("boolean")
    x_is_null = exp.paren(exp.Is(this=values[0].copy(), expression=exp.null()))
    x_is_null.type = exp.DataType.build("boolean")
    beside_null_x = _positive(_count(inner, exp.EQ(this=any_row, expression=x_is_null)))
    null_y = _positive(_count(inner, exp.Is(this=columns[0].copy(), expression=exp.null())))
    return [beside_null_x, null_y]


def _null_aware_pair(
    inner: exp.Select, values: list[exp.Expr], columns: list[exp.Column]
) -> list[exp.Expr]:
    """``(a, b)``: a row matches where the columns not compared equal (a set K of them
    is) are NULL on the row's side (P) or on the outer side (Q). One count per K
    (equality on K: three joins besides the flag's), its value a bit per P (whether a
    row of the group has those columns NULL, bit 0: any row); the outer row reads the
    bit of P = the columns outside K where its own values are not NULL (a row NULL in
    more columns has the lesser bits too). A count per (Q, P) would be nine joins."""
    every = list(range(len(values)))
    flags: list[exp.Expr] = []
    for k in _subsets(every)[:-1]:  # K = every column is the caller's plain flag
        free = [i for i in every if i not in k]
        bits: list[exp.Expr] = []
        for index, p in enumerate(_subsets(free)):
            nulls = [exp.Is(this=columns[i].copy(), expression=exp.null()) for i in p]
            rows: exp.Expr = exp.Count(this=exp.Star())
            if nulls:
                rows = exp.Filter(this=rows, expression=exp.Where(this=exp.and_(*nulls)))
            present = exp.func("least", rows, exp.Literal.number(1))
            bits.append(exp.Mul(this=present, expression=exp.Literal.number(1 << index)))
        value = bits[0]
        for bit in bits[1:]:
            value = exp.Add(this=value, expression=bit)
        counted = _count(
            inner, *(exp.EQ(this=columns[i].copy(), expression=values[i].copy()) for i in k)
        )
        counted.set("expressions", [exp.alias_(value, VALUE)])
        wanted = exp.case()
        for index, p in reversed(list(enumerate(_subsets(free)))):
            not_null = [
                exp.Not(this=exp.Is(this=values[i].copy(), expression=exp.null())) for i in p
            ]
            outer_nulls = [
                exp.Is(this=values[i].copy(), expression=exp.null()) for i in free if i not in p
            ]
            # never empty: K leaves at least one column out
            wanted = wanted.when(exp.and_(*not_null, *outer_nulls), exp.Literal.number(1 << index))
        sq = exp.Subquery(this=counted)
        sq.meta[_COUNTED] = True
        masked = exp.BitwiseAnd(this=exp.paren(sq), expression=exp.paren(wanted))
        flags.append(exp.paren(exp.NEQ(this=exp.paren(masked), expression=exp.Literal.number(0))))
    return flags


def _subsets(items: list[int]) -> list[list[int]]:
    return [[i for k, i in enumerate(items) if mask >> k & 1] for mask in range(1 << len(items))]


def _count(inner: exp.Expr, *conditions: exp.Expr) -> exp.Select:
    """``SELECT COUNT(*) FROM (inner) AS _IN_ALIAS WHERE conditions``."""
    alias = exp.TableAlias(this=exp.to_identifier(_IN_ALIAS))
    counted = exp.select(exp.alias_(exp.Count(this=exp.Star()), VALUE)).from_(
        exp.Subquery(this=inner.copy(), alias=alias)
    )
    return counted.where(exp.and_(*conditions)) if conditions else counted


def _negated(node: exp.Expr, root: exp.Expr) -> bool:
    """Whether an odd number of NOTs lie above ``node`` up to where its truth is read:
    under AND, OR, NOT and parentheses up to a WHERE, a CASE/IF condition, an aggregate's
    FILTER or a select item's whole value (Spark moves a NOT through AND and OR onto the
    IN, whose flag is then null-aware). Refused anywhere else: where a FALSE told from an unknown would
    show, or where Spark's optimizer decides which flag it is."""
    child, parent = node, node.parent
    nots = 0
    while child is not root and parent is not None:
        if isinstance(parent, exp.If) and child.arg_key == "this":
            break  # a condition: TRUE picks the branch, FALSE and unknown alike do not
        if isinstance(parent, exp.Where) and isinstance(parent.parent, exp.Filter):
            break  # an aggregate's FILTER: the same
        if isinstance(parent, exp.Not):
            nots += 1
        elif not isinstance(parent, exp.Paren | exp.And | exp.Or | exp.Alias):
            raise Unsupported(
                "SUBQUERY_EXPRESSION",
                f"IN (subquery) under {type(parent).__name__.upper()}: Spark answers it as an "
                "existence flag or as the null-aware NOT IN, depending on its optimizer; "
                "recomputed",
            )
        child, parent = parent, parent.parent
    return nots % 2 == 1


def _exists_body(node: exp.Expr) -> exp.Expr:
    return node.this.this if isinstance(node.this, exp.Subquery) else node.this


def _positive(counted: exp.Select) -> exp.Expr:
    """``(counted) > 0``, its subquery marked as made here (see :func:`counted`)."""
    sq = exp.Subquery(this=counted)
    sq.meta[_COUNTED] = True
    return exp.paren(exp.GT(this=sq, expression=exp.Literal.number(0)))


def counted(sq: exp.Subquery) -> bool:
    """A scalar subquery made here: Spark never sees it as one (it answers the EXISTS or
    IN), so what Spark answers for a COUNT subquery over an input it proves empty (NULL,
    not 0) does not concern it."""
    return bool(sq.meta.get(_COUNTED))


def _positive_limit(limit: exp.Expr) -> bool:
    value = limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(value, exp.Literal) and value.is_int and int(value.this) > 0


def _renamed_apart(query: exp.Expr, taken: set[str]) -> exp.Expr:
    """``query`` with every table alias the outer query also uses renamed, in its tables
    and subqueries and in the columns that name it. The subquery does not refer to the
    outer query, so each such alias names one of its own tables (or several, in nested
    scopes, which one new name keeps apart just as the old one did)."""
    aliases = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    aliases |= {s.alias_or_name.lower() for s in query.find_all(exp.Subquery) if s.alias}
    clash = sorted(aliases & {a.lower() for a in taken})
    if not clash:
        return query
    new = {old: f"{RENAMED}{i}" for i, old in enumerate(clash)}
    for n in query.find_all(exp.Table, exp.Subquery):
        old = n.alias_or_name.lower()
        if old not in new or (isinstance(n, exp.Subquery) and not n.alias):
            continue
        alias = n.args.get("alias")
        columns = alias.args.get("columns") if isinstance(alias, exp.TableAlias) else None
        n.set("alias", exp.TableAlias(this=exp.to_identifier(new[old]), columns=columns))
    for c in query.find_all(exp.Column):
        if c.table and c.table.lower() in new:
            c.set("table", exp.to_identifier(new[c.table.lower()]))
    return query
