"""A HAVING with a subquery in it, as the WHERE of a query over the grouped rows.

Spark filters the groups with such a HAVING after aggregating, just as a WHERE over a
derived table of the groups filters them: ``SELECT s, SUM(n) AS x FROM t GROUP BY s
HAVING s IN (SELECT ...)`` is ``SELECT c0 AS s, c1 AS x FROM (SELECT s AS c0, SUM(n)
AS c1, s AS h0 FROM t GROUP BY s) g WHERE h0 IN (SELECT ...)``. The WHERE's rules
(semi and anti joins, counted truth values, correlated scalar subqueries) then maintain
it like any other, over the aggregate's delta.

What the condition reads of the grouped rows becomes a hidden column of the derived
table: each aggregate call, each grouped expression, each column of the SELECT's own
tables, also where a subquery refers to one (a correlation) or aggregates only them
(Spark computes such an aggregate in the outer query).
"""

from __future__ import annotations

from sqlglot import exp

from dyntables.plan.calls import group_by_all_keys, is_aggregate_call, own_nodes
from dyntables.plan.subquery import Unsupported, is_exists_subquery

# the derived table of the grouped rows, and its columns: the SELECT's items, then what
# the condition reads
ALIAS = "__dyntables_having"
_ITEM = "__dyntables_c"
_HIDDEN = "__dyntables_h"


def as_where(select: exp.Select) -> exp.Select | None:
    """``select`` (qualified, its HAVING aliases expanded) with its HAVING as the WHERE of
    a query over its groups, or None when the HAVING has no subquery that needs it (an
    uncorrelated scalar subquery is joined above the aggregate as it is). Raises
    :class:`Unsupported` where the two would differ."""
    having = select.args.get("having")
    outer = _from_aliases(select)
    if having is None or not _needs_rewrite(having.this, outer):
        return None
    if any(item.find(exp.Window) for item in select.expressions):
        raise Unsupported(  # Spark computes them over the groups HAVING kept
            "SUBQUERY_EXPRESSION", "a subquery in the HAVING of a SELECT with window functions"
        )
    group = select.args.get("group")
    if group is not None and group.args.get("all"):
        # spelled out, as Spark reads it (every item without an aggregate), before a
        # hidden column could become one more key; none left: a global aggregate
        keys = [k.copy() for k in group_by_all_keys(select.expressions)]
        select = select.copy()
        select.set("group", exp.Group(expressions=keys) if keys else None)
        group = select.args.get("group")
    if any(isinstance(i, exp.Aliases) for i in select.expressions):
        raise Unsupported("SUBQUERY_EXPRESSION", "a subquery in the HAVING beside a generator")
    if having.this.find(exp.Grouping, exp.GroupingId):
        raise Unsupported(
            "SUBQUERY_EXPRESSION", "a subquery in a HAVING that reads grouping() or grouping_id()"
        )
    grouped = [g.unnest() for g in group.expressions] if group is not None else []
    hidden: dict[str, tuple[str, exp.Expr]] = {}

    def hide(n: exp.Expr) -> exp.Column:
        key = n.sql("spark")
        if key not in hidden:
            hidden[key] = (f"{_HIDDEN}{len(hidden)}", n.copy())
        column = exp.column(hidden[key][0], table=ALIAS)
        column.type = n.type
        return column

    holder = exp.Paren(this=having.this.copy())
    for n in list(holder.this.walk()):
        if not _attached(n, holder):
            continue  # inside a part already hidden
        inside = _in_subquery(n, holder)
        if inside is None:
            if any(n == g for g in grouped) or _aggregate(n) or _outer_column(n, outer):
                n.replace(hide(n))
        elif (_aggregate(n) and _only_outer(n, inside, outer)) or (
            isinstance(n, exp.Column) and _is_outer(n, inside, outer)
        ):
            n.replace(hide(n))
    for n in own_nodes(holder):
        if isinstance(n, exp.Column) and n.table != ALIAS:
            raise Unsupported(
                "UNRESOLVED_QUERY",
                f"column {n.sql('spark')} in HAVING is neither grouped nor aggregated",
            )
    if group is None:
        # a HAVING makes the SELECT one group even with no aggregate in it (one row, also
        # over no rows): without the HAVING, a COUNT keeps it one
        hide(exp.Count(this=exp.Star()))
    inner = select.copy()
    inner.set("having", None)
    inner.set("order", None)  # a table has no order; a LIMIT was ranked before
    distinct = inner.args.get("distinct")
    inner.set("distinct", None)
    items = list(select.expressions)
    inner.set(
        "expressions",
        [_named(i.unalias().copy(), f"{_ITEM}{k}") for k, i in enumerate(items)]
        + [_named(e, name) for name, e in hidden.values()],
    )
    columns = []
    for k, item in enumerate(items):
        column = exp.column(f"{_ITEM}{k}", table=ALIAS)
        column.type = item.unalias().type
        columns.append(_named(column, item.alias_or_name))
    query = exp.select(*columns).from_(inner.subquery(ALIAS)).where(holder.this)
    if distinct is not None:
        query.set("distinct", distinct)
    return query


def _named(e: exp.Expr, name: str) -> exp.Alias:
    """``e AS name``; sqlglot's ``alias_`` would name a subquery as a derived table."""
    return exp.Alias(this=e, alias=exp.to_identifier(name))


def _needs_rewrite(condition: exp.Expr, outer: set[str]) -> bool:
    for n in condition.walk():
        if is_exists_subquery(n) or (isinstance(n, exp.In) and n.args.get("query") is not None):
            return True
        if isinstance(n, exp.Subquery) and any(
            _is_outer(c, n, outer) for c in n.find_all(exp.Column)
        ):
            return True
    return False


def _from_aliases(select: exp.Select) -> set[str]:
    """The aliases a SELECT's FROM, joins and LATERAL VIEWs name its rows by."""
    from_ = select.args.get("from_") or select.args.get("from")
    sources = [from_.this] if from_ is not None else []
    sources += [j.this for j in select.args.get("joins") or []]
    aliases = {s.alias_or_name.lower() for s in sources if s.alias_or_name}
    for lateral in select.args.get("laterals") or []:
        alias = lateral.args.get("alias")
        if alias is not None and alias.name:
            aliases.add(alias.name.lower())
    return aliases


def _in_subquery(n: exp.Expr, root: exp.Expr) -> exp.Expr | None:
    """The outermost query of ``root`` that ``n`` lies in, or None."""
    found = None
    parent = n.parent
    while parent is not None and parent is not root:
        if isinstance(parent, exp.Query):
            found = parent
        parent = parent.parent
    return found


def _attached(n: exp.Expr, root: exp.Expr) -> bool:
    while n is not root:
        if n.parent is None:
            return False
        n = n.parent
    return True


def _is_outer(column: exp.Column, inside: exp.Expr, outer: set[str]) -> bool:
    """Whether ``column``, in the query ``inside``, names a table of the outer SELECT: no
    SELECT between them has a table of its own by that name."""
    table = column.table.lower()
    if not table or table not in outer:
        return False
    parent = column.parent
    while parent is not None:
        if isinstance(parent, exp.Select) and table in _from_aliases(parent):
            return False
        if parent is inside:
            break
        parent = parent.parent
    return True


def _outer_column(n: exp.Expr, outer: set[str]) -> bool:
    return isinstance(n, exp.Column) and n.table.lower() in outer


def _aggregate(n: exp.Expr) -> bool:
    return is_aggregate_call(n) or (isinstance(n, exp.Filter) and is_aggregate_call(n.this))


def _only_outer(n: exp.Expr, inside: exp.Expr, outer: set[str]) -> bool:
    columns = list(n.find_all(exp.Column))
    return bool(columns) and all(_is_outer(c, inside, outer) for c in columns)
