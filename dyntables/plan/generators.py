"""Generators (explode, inline, stack, ...): which calls they are, and where the builder
models them."""

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


def generates(item: exp.Expr) -> bool:
    """A SELECT item that is a generator named by its alias(es)."""
    if isinstance(item, exp.Aliases):
        return True
    return isinstance(item, exp.Alias) and call_name(item.this) in GENERATORS


def modelled_generator(n: exp.Expr) -> bool:
    """A generator (or ``AS (a, b)``) where the compiler models it: the call of a
    LATERAL VIEW, or a named item of a SELECT list (Spark's default names for an unnamed
    one, ``col``, ``pos``, ``key``, ``value``, are not)."""
    parent = n.parent
    if isinstance(parent, exp.Lateral) and n.arg_key == "this":
        return bool(parent.args.get("view"))
    if isinstance(parent, exp.Alias | exp.Aliases) and n.arg_key == "this":
        n, parent = parent, parent.parent  # the generator named: where is its name?
    named = isinstance(n, exp.Alias | exp.Aliases)
    return named and isinstance(parent, exp.Select) and n.arg_key == "expressions"
