"""``ORDER BY ... LIMIT n [OFFSET m]`` as a ranking: the same rows, numbered by the order
and filtered by their number.

Pure sqlglot: a qualified query in, a SELECT out that the builder compiles like any
other. ``SELECT ... ORDER BY o LIMIT n`` keeps the first n rows in the order o, which is
what ``SELECT * FROM (SELECT ..., ROW_NUMBER() OVER (ORDER BY o) AS r FROM (...)) WHERE
r <= n`` keeps: a window without PARTITION BY, whose rule recomputes the single
partition from its input. Over an aggregate that input is the aggregate's state (a row
per group), so a top-N of groups ("the 10 categories with the most sales") is refreshed
from the groups, never from the rows below them. Rows that tie in the order are
numbered by their other columns (the builder makes every ROW_NUMBER's order total):
one of the answers LIMIT could give, and the same one at every refresh.

The order may name the query's columns (by name or position) or, in a SELECT without
DISTINCT, any expression Spark allows there (``ORDER BY SUM(x)``, a column not
selected); that one is computed as a hidden column of the SELECT and dropped above the
ranking. LIMIT without ORDER BY keeps whichever rows Spark reads first, which no rule
can follow; it stays FULL, as do a LIMIT or OFFSET that is not a constant number.
"""

from __future__ import annotations

from sqlglot import exp

from dyntables.plan.generators import holds_generator

ROWS_ALIAS = "_top"
RANKED_ALIAS = "_ranked"
RANK = "_top_rank"
HIDDEN = "_top_order"


class Unsupported(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def as_ranked(query: exp.Query) -> exp.Select:
    """``query`` (qualified, with LIMIT or OFFSET, its WITH already taken by the caller)
    as a ranking over the same query without ORDER BY, LIMIT and OFFSET."""
    limit = _count(query.args.get("limit"), "LIMIT")
    offset = _count(query.args.get("offset"), "OFFSET") or 0
    order = query.args.get("order")
    if order is None or not order.expressions:
        raise Unsupported(
            "LIMIT without ORDER BY keeps whichever rows Spark reads first; recomputed FULL"
        )
    rows = query.copy()
    for clause in ("order", "limit", "offset", "with_", "with"):
        rows.set(clause, None)
    names = list(rows.named_selects)
    if any(not n for n in names) or len({n.lower() for n in names}) != len(names):
        raise Unsupported("ORDER BY ... LIMIT over columns without distinct names")
    by_name = {n.lower(): n for n in names}
    taken = set(by_name)  # the helper columns' names must not be the query's (helper-31)
    hidden: list[str] = []
    keys: list[exp.Ordered] = []
    for ordered in order.expressions:
        assert isinstance(ordered, exp.Ordered)
        key = ordered.this
        name = _output_name(key, by_name, names) or _selected_as(key, rows)
        if name is None:
            name = _hide(rows, key, by_name, _unused(f"{HIDDEN}{len(hidden)}", taken))
            hidden.append(name)
        ranked_key = ordered.copy()
        ranked_key.set("this", exp.column(_ident(name), ROWS_ALIAS))
        keys.append(ranked_key)
    every = names + hidden
    rank = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=keys))
    rank_name = _unused(RANK, taken)
    ranked = exp.select(
        *(exp.alias_(exp.column(_ident(n), ROWS_ALIAS), _ident(n)) for n in every),
        exp.alias_(rank, rank_name),
    ).from_(rows.subquery(ROWS_ALIAS))
    numbered = exp.column(rank_name, RANKED_ALIAS)
    kept: exp.Expr = exp.GT(this=numbered, expression=exp.Literal.number(offset))
    if limit is not None:
        last = exp.LTE(this=numbered.copy(), expression=exp.Literal.number(offset + limit))
        kept = exp.and_(kept, last) if offset else last
    return (
        exp.select(*(exp.alias_(exp.column(_ident(n), RANKED_ALIAS), _ident(n)) for n in names))
        .from_(ranked.subquery(RANKED_ALIAS))
        .where(kept)
    )


def _count(clause: exp.Expr | None, what: str) -> int | None:
    if clause is None:
        return None
    value = clause.args.get("expression")
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    raise Unsupported(f"{what} {value.sql('spark') if value else ''} is not a constant number")


def _output_name(key: exp.Expr, by_name: dict[str, str], names: list[str]) -> str | None:
    """The query's column ``key`` names: an unqualified column (qualification left only
    the select list's names unqualified) or a position."""
    if isinstance(key, exp.Column) and not key.table:
        return by_name.get(key.name.lower())
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        position = int(key.this)
        return names[position - 1] if 0 < position <= len(names) else None
    return None


def _selected_as(key: exp.Expr, rows: exp.Query) -> str | None:
    """The name of the select list's item that is ``key`` as written (``ORDER BY t1.s``
    of ``SELECT DISTINCT t1.s AS s``): its value is that column's in every row, so a
    DISTINCT can be ordered by it."""
    if not isinstance(rows, exp.Select):
        return None
    for item in rows.expressions:
        if item.alias_or_name and item.unalias() == key:
            return item.alias_or_name
    return None


def _unused(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, ...: the first not in ``taken`` (lower case),
    which it joins."""
    name, n = base, 0
    while name.lower() in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name.lower())
    return name


def _hide(rows: exp.Query, key: exp.Expr, by_name: dict[str, str], name: str) -> str:
    """Compute the order's expression ``key`` as a hidden column ``name`` of ``rows``."""
    if not isinstance(rows, exp.Select):
        raise Unsupported(
            "ORDER BY of a set operation by an expression that is not one of its columns"
        )
    if rows.args.get("distinct"):
        raise Unsupported("ORDER BY of a DISTINCT by an expression that is not one of its columns")
    items = {i.alias_or_name.lower(): i.unalias() for i in rows.expressions}

    def as_item(node: exp.Expr) -> exp.Expr:
        # Spark reads a bare name in an ORDER BY expression as the select list's column
        # of that name first (``SELECT n AS k ... ORDER BY abs(k)`` orders by abs(n))
        if not (isinstance(node, exp.Column) and not node.table and node.name.lower() in by_name):
            return node
        item = items[node.name.lower()]
        if (
            item.find(exp.Window)
            or holds_generator(item)
            or any(not c.table for c in item.find_all(exp.Column))
        ):
            raise Unsupported(
                f"ORDER BY {key.sql('spark')[:60]} reads a column of the select list that "
                "is a window, a generator or a lateral alias"
            )
        return exp.paren(item.copy())

    rows.append("expressions", exp.alias_(key.copy().transform(as_item), name))
    return name


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=not exp.SAFE_IDENTIFIER_RE.match(name))
