"""Window functions as the builder takes them: named windows written out in each OVER,
and an order made total where the answer would depend on how Spark orders tied rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from dyntables.plan.calls import call_name, own_nodes
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import col


def holds_map(e: exp.Expr | None) -> bool:
    """Whether ``e``'s type (as sqlglot annotated it) is or holds a MAP, which Spark
    cannot order."""
    t = getattr(e, "type", None)
    return isinstance(t, exp.DataType) and any(
        d.this == exp.DataType.Type.MAP for d in t.find_all(exp.DataType)
    )


def breaks_ties(w: exp.Window) -> bool:
    """Whether ``w``'s answer depends on the order among rows tied in its ORDER BY in a way
    an order that tells them apart fixes (see :func:`total_order`); raises when it
    depends on it in a way no such order fixes."""
    if w.args.get("order") is None:
        return False
    ignore_nulls = isinstance(w.this, exp.IgnoreNulls)
    call = w.this.this if isinstance(w.this, exp.IgnoreNulls | exp.RespectNulls) else w.this
    spec = w.args.get("spec")
    kind = str(spec.args.get("kind") or "").upper() if spec is not None else "RANGE"
    start = str(spec.args.get("start") or "").upper() if spec is not None else "UNBOUNDED"
    end = str(spec.args.get("end") or "CURRENT ROW").upper() if spec is not None else "CURRENT ROW"
    positional = isinstance(call, exp.RowNumber | exp.Ntile | exp.Lag | exp.Lead) or kind == "ROWS"
    if not positional:
        if not isinstance(call, exp.FirstValue | exp.LastValue | exp.NthValue):
            return False  # peers share one value
        whole = start == "UNBOUNDED" and end == "UNBOUNDED"
        first_from_start = (
            isinstance(call, exp.FirstValue) and not ignore_nulls and start == "UNBOUNDED"
        )
        if not (whole or (first_from_start and end in ("CURRENT ROW", "UNBOUNDED"))):
            raise NotIncremental(
                "WINDOW_TIES",
                call_name(call).upper(),
                "picks among the rows tied in its ORDER BY in the order Spark reads them "
                "(its RANGE frame ends at the current row's last peer); recomputed FULL. "
                "Over a ROWS frame, or a frame of the whole partition, it is maintained",
            )
    return True


def total_order(w: exp.Window, breakers: list[str]) -> exp.Window:
    """``w`` with its order made total where the answer depends on the order among rows
    tied in it: ``breakers`` (the input's columns the query uses) appended to its ORDER BY.

    Spark numbers tied rows (ROW_NUMBER, NTILE), reads their neighbours (LAG, LEAD) and
    counts positional frames (ROWS) in whichever order it reads them, and that order
    changes between two reads of the same rows. A window's rule recomputes the touched
    partitions as they were, to remove what the table holds for them; read in another
    order, those are other rows than the table holds (a deduplication that kept row a of
    two tied rows removes b), and a deleted row stayed in the table. Ordered by every
    column the query uses, tied rows are equal wherever they are read, so the table
    (built from the same plan by a FULL refresh) and every recomputation agree. Any
    such order is one Spark could have taken, so the answer stays the query's.

    Functions whose peers share one value (RANK, aggregates over RANGE frames) keep
    their order: breaking their ties would change the answer. FIRST_VALUE from the
    partition's start is the first row whatever the frame's end; LAST_VALUE, NTH_VALUE
    and FIRST_VALUE IGNORE NULLS over a RANGE frame pick among the peers in the frame
    and would change too: refused (FULL recomputes all at once, one order)."""
    order = w.args.get("order")
    if order is None or not breakers or not breaks_ties(w):
        return w
    keys = {o.this.sql("spark") for o in order.expressions}
    keys |= {p.sql("spark") for p in w.args.get("partition_by") or []}
    extra = [exp.Ordered(this=col(c), nulls_first=True) for c in breakers]
    order.set(
        "expressions", [*order.expressions, *(o for o in extra if o.this.sql("spark") not in keys)]
    )
    return w


def inline_named_windows(tree: exp.Query) -> exp.Query:
    """``SUM(x) OVER w ... WINDOW w AS (PARTITION BY k)`` with the window written out in
    each OVER: the builder moves window functions into their own operator, away from the
    SELECT whose WINDOW clause names them, and Spark then found ``w`` undefined."""
    for select in tree.find_all(exp.Select):
        named = select.args.get("windows")
        if not named:
            continue
        defs = {w.this.name.lower(): w for w in named if isinstance(w.this, exp.Identifier)}

        for part in select.expressions:
            for n in own_nodes(part):
                if not (isinstance(n, exp.Window) and n.args.get("alias") and n.this is not None):
                    continue
                for key, value in named_window(defs, n.alias.lower()).items():
                    if value and not n.args.get(key):
                        n.set(
                            key,
                            [v.copy() for v in value] if isinstance(value, list) else value.copy(),
                        )
                n.set("alias", None)
        select.set("windows", None)
    return tree


def named_window(
    defs: Mapping[str, exp.Window], name: str, seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    """PARTITION BY, ORDER BY and frame of a named window (``w2 AS (w1 ...)`` builds on
    w1)."""
    if name not in defs or name in seen:
        raise NotIncremental("NAMED_WINDOW", "WINDOW", f"window {name} is not defined")
    d = defs[name]
    base = named_window(defs, d.alias.lower(), (*seen, name)) if d.args.get("alias") else {}
    return {k: d.args.get(k) or base.get(k) for k in ("partition_by", "order", "spec")}
