"""Time buckets written with ``window()`` and its kin: where a SELECT has them, and how
long a bucket is."""

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


MICROSECONDS = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 604_800_000_000,
}


def interval_length(lit: exp.Expr) -> int | str:
    """A window duration's length in microseconds ('60 minutes' is '1 hour'), or its
    text when it is not a plain sum of ``<number> <unit>`` parts."""
    words = lit.name.lower().split()
    if words[:1] == ["interval"]:
        words = words[1:]
    if not words or len(words) % 2:
        return " ".join(words)
    total = 0
    for number, unit in zip(words[::2], words[1::2], strict=True):
        scale = MICROSECONDS.get(unit.rstrip("s"))
        if scale is None or not number.isdigit():
            return " ".join(words)
        total += int(number) * scale
    return total
