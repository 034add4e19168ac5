"""Time buckets written with ``window()`` and its kin: where a SELECT has them."""

from __future__ import annotations

from sqlglot import exp

from dyntables.plan.calls import own_nodes

# the name a SELECT refers to its time bucket by; never a column of the query's tables
# (the scope is keyed by alias and name, and no table has the empty alias)
TIME_WINDOW_COLUMN = "__dyntables_time_window"


TIME_WINDOW_FUNCTIONS = frozenset({"window", "session_window", "window_time"})


def own_time_windows(root: exp.Expr) -> list[exp.Anonymous]:
    """The time-window calls of one SELECT (or one of its clauses), in its own scope."""
    if isinstance(root, exp.Select):
        parts = [
            *root.expressions,
            *(root.args[k] for k in ("where", "group", "having") if root.args.get(k)),
        ]
    else:
        parts = [root]
    return [
        n
        for part in parts
        for n in own_nodes(part)
        if isinstance(n, exp.Anonymous) and n.name.lower() in TIME_WINDOW_FUNCTIONS
    ]
