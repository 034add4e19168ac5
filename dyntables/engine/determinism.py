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
    """The SQL of an innermost non-deterministic call in ``df``'s analyzed plan, or None
    when Spark deems the whole plan deterministic. ``spark_partition_id()`` does not
    count: it is the filter that reads as empty a never-written source whose own columns
    hide the Iceberg metadata columns the filter would use (query.never_true), and a
    query's own is refused by name before."""
    plan = df._jdf.queryExecution().analyzed()
    if plan.deterministic():
        return None
    found: list[Any] = []
    _in_plan(plan, found)
    calls = [e for e in found if e.getClass().getSimpleName() != "SparkPartitionID"]
    if not calls:
        return None
    sql: str = calls[0].sql()
    return sql


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _in_plan(plan: Any, found: list[Any]) -> None:
    for expression in _seq(plan.expressions()):
        if not expression.deterministic():
            _in_expression(expression, found)
    for child in _seq(plan.children()):
        if not child.deterministic():
            _in_plan(child, found)


def _in_expression(expression: Any, found: list[Any]) -> None:
    children = [c for c in _seq(expression.children()) if not c.deterministic()]
    for child in children:
        _in_expression(child, found)
    if children:
        return
    # a subquery expression is non-deterministic through its plan
    if "SubqueryExpression" in _class_chain(expression):
        _in_plan(expression.plan(), found)
    else:
        found.append(expression)


def _class_chain(obj: Any) -> str:
    names = []
    cls = obj.getClass()
    while cls is not None:
        names.append(cls.getSimpleName())
        cls = cls.getSuperclass()
    return " ".join(names)
