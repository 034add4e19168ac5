"""Whether Spark itself calls a query non-deterministic, and which call makes it so.

The compiler refuses the non-deterministic functions it knows by name (rand, uuid,
current_timestamp, ...) before any Spark work. Spark knows more: ``reflect`` and
``java_method``, ``shuffle``, and any UDF its author marked ``asNondeterministic()``.
Its analyzed plan carries that flag on every expression, subqueries included, so one
question to the JVM covers them all; the walk that names the culprit follows only the
non-deterministic path.
"""

from __future__ import annotations

from typing import Any


def non_deterministic_call(df: Any) -> str | None:
    """The SQL of the innermost non-deterministic call in ``df``'s analyzed plan, or None
    when Spark deems the whole plan deterministic."""
    plan = df._jdf.queryExecution().analyzed()
    if plan.deterministic():
        return None
    return _in_plan(plan) or "a non-deterministic expression"


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _in_plan(plan: Any) -> str | None:
    for expression in _seq(plan.expressions()):
        if not expression.deterministic():
            found = _in_expression(expression)
            if found:
                return found
    for child in _seq(plan.children()):
        if not child.deterministic():
            found = _in_plan(child)
            if found:
                return found
    return None


def _in_expression(expression: Any) -> str | None:
    for child in _seq(expression.children()):
        if not child.deterministic():
            return _in_expression(child)
    # a subquery expression is non-deterministic through its plan
    if "SubqueryExpression" in _class_chain(expression):
        return _in_plan(expression.plan())
    sql: str = expression.sql()
    return sql


def _class_chain(obj: Any) -> str:
    names = []
    cls = obj.getClass()
    while cls is not None:
        names.append(cls.getSimpleName())
        cls = cls.getSuperclass()
    return " ".join(names)
