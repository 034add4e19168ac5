"""Time buckets written with ``window()`` and its kin: where a SELECT has them."""

from __future__ import annotations

from collections.abc import Collection

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


# the functions Spark names a bucket's column after, in a GROUP BY
_NAMED_BUCKETS = frozenset({"window", "session_window"})


def write_bucket_names_out(tree: exp.Expr, source_columns: Collection[str]) -> None:
    """``SELECT window.start, COUNT(*) ... GROUP BY window(ts, '1 hour')`` (Spark's own
    documented form): Spark names a GROUP BY's time bucket after its function, and
    sqlglot cannot resolve that name, so the plan's tree reads the call itself there
    (``window(ts, '1 hour').start AS start``). Not where the name may mean something
    else: a source column, or an alias or column of the query, named like it; nor
    beside a second bucket (Spark refuses that)."""
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        calls = (
            [n for n in own_time_windows(group) if n.name.lower() in _NAMED_BUCKETS]
            if group
            else []
        )
        if len(calls) != 1:
            continue
        call = calls[0]
        name = call.name.lower()
        if name in source_columns or any(
            i.name.lower() == name and not isinstance(i.parent, exp.Column)
            for i in tree.find_all(exp.Identifier)
        ):
            continue
        parts = [*select.expressions]
        parts += [select.args[k] for k in ("having", "order", "qualify") if select.args.get(k)]
        for part in parts:
            for column in [n for n in own_nodes(part) if isinstance(n, exp.Column)]:
                if column.table.lower() == name and not column.args.get("db"):
                    read: exp.Expr = exp.Dot(this=call.copy(), expression=column.this.copy())
                elif not column.table and column.name.lower() == name:
                    read = call.copy()
                else:
                    continue
                if column.parent is select:  # a select item keeps the name Spark gives it
                    read = exp.alias_(read, column.output_name)
                column.replace(read)
