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

import threading

from sqlglot import exp

from dyntables.sql.tokens import needs_quotes

# written as something other than an infix or prefix operator over its operands
_NOT_OPERATORS = (exp.Dot, exp.Kwarg, exp.PropertyEQ, exp.Paren, exp.SubqueryPredicate)
_OPERANDS = ("this", "expression", "low", "high")
_WRITING = threading.Lock()


def _operator(e: object) -> bool:
    return isinstance(e, (exp.Binary, exp.Unary, exp.Predicate)) and not isinstance(
        e, _NOT_OPERATORS
    )


def _bare_operands(
    tree: exp.Expr,
) -> tuple[list[tuple[exp.Expr, str, exp.Expr]], list[exp.Identifier]]:
    """(operator, arg key, operand) for every operand of an operator that is itself an
    operator and not yet in parentheses; and the unquoted identifiers Spark's lexer
    does not read as names when bare. sqlglot leaves a name unquoted when Python's
    ``\\w`` matches it, which takes letters such as ``ö`` (Spark's lexer takes ASCII
    ones only) and words such as ``true`` (a column named so came out as the literal)."""
    found = []
    unquoted = []
    for node in tree.walk():
        if isinstance(node, exp.Identifier):
            if not node.quoted and needs_quotes(node.name):
                unquoted.append(node)
            continue
        # ESCAPE's operand is the LIKE it belongs to: ``(x LIKE p) ESCAPE c`` is no SQL
        if not _operator(node) or isinstance(node, exp.Escape):
            continue
        keys = ("this",) if isinstance(node, exp.In) else _OPERANDS
        for key in keys:
            child = node.args.get(key)
            if isinstance(child, exp.Expr) and _operator(child):
                found.append((node, key, child))
    return found, unquoted


def spark_sql(tree: exp.Expr) -> str:
    """The Spark SQL text of ``tree``, as its operator tree means it. The parentheses are
    put in for the writing and taken out after it, rather than written into a copy: a
    refresh writes large trees, and copying one cost more than writing it. One writing
    at a time, so that a tree two threads write is never seen half-parenthesized."""
    with _WRITING:
        bare, unquoted = _bare_operands(tree)
        for node, key, child in bare:
            node.set(key, exp.Paren(this=child))
        for ident in unquoted:
            ident.set("quoted", True)
        try:
            return tree.sql("spark")
        finally:
            for node, key, child in bare:
                node.set(key, child)
            for ident in unquoted:
                ident.set("quoted", False)
