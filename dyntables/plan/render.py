"""Spark SQL text of a sqlglot tree, parenthesized as the tree means it.

sqlglot writes an operator's operands without parentheses unless the tree holds a
``Paren`` node, which only its parser adds. A tree built or rewritten in code loses
that: ``COUNT(DISTINCT NOT (n > 0))``'s argument under the delta rule's ``NOT (... IS
NULL)`` came out as ``NOT NOT (n > 0) IS NULL``, which Spark reads as ``(n > 0) IS
NULL``; a key ``a OR b`` under ``<=>`` lost its grouping; sqlglot's own parse of
``ts - INTERVAL 1 DAY 2 HOURS`` (a sum of two intervals) came out as ``ts - INTERVAL
'1' DAY + INTERVAL '2' HOURS``. Every operand that is itself an operator is therefore
parenthesized before the text is written: parentheses never change what a tree means.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

E = TypeVar("E", bound=exp.Expr)

# written as something other than an infix or prefix operator over its operands
_NOT_OPERATORS = (exp.Dot, exp.Kwarg, exp.PropertyEQ, exp.Paren, exp.SubqueryPredicate)
_OPERANDS = ("this", "expression", "low", "high")


def _operator(e: object) -> bool:
    return isinstance(e, (exp.Binary, exp.Unary, exp.Predicate)) and not isinstance(
        e, _NOT_OPERATORS
    )


def parenthesized(tree: E) -> E:
    """A copy of ``tree`` with every operator's operator operands in parentheses."""
    out = tree.copy()
    for node in list(out.walk()):
        # ESCAPE's operand is the LIKE it belongs to: ``(x LIKE p) ESCAPE c`` is no SQL
        if not _operator(node) or isinstance(node, exp.Escape):
            continue
        if isinstance(node, exp.In):
            keys: tuple[str, ...] = ("this",)
        else:
            keys = _OPERANDS
        for key in keys:
            child = node.args.get(key)
            if _operator(child):
                node.set(key, exp.Paren(this=child))
    return out


def spark_sql(tree: exp.Expr) -> str:
    """The Spark SQL text of ``tree``, as its operator tree means it."""
    return parenthesized(tree).sql("spark")
