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


# Window functions whose value over a frame depends only on the frame's rows, not on the
# order Spark reads them in: counts, exact sums and extremes, ranks whose peers share a
# value, aggregates of the values alone (BOOL_AND, MEDIAN). A DOUBLE sum is not (rounding
# follows the order of additions), nor is a DOUBLE extreme (-0.0 equals 0.0: the first
# read wins).
_ORDER_FREE = (
    exp.Count,
    exp.CountIf,
    exp.ApproxDistinct,
    exp.Rank,
    exp.DenseRank,
    exp.PercentRank,
    exp.CumeDist,
    exp.LogicalAnd,
    exp.LogicalOr,
    exp.BitwiseAndAgg,
    exp.BitwiseOrAgg,
    exp.BitwiseXorAgg,
    exp.Median,  # of the values sorted
    exp.Quantile,
)
_EXACT_WHEN_TYPED = (exp.Sum, exp.Min, exp.Max)
# ... and those whose value is what Spark read first or last among the frame's rows, in
# the order it read them, or a tie among them: a RANGE frame of a range of values
# (``1 PRECEDING``) holds peers in no order, which no tie-breaker can fix without changing
# the frame
_PICKED_IN_READ_ORDER = (
    exp.First,
    exp.Last,
    exp.AnyValue,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
    exp.ArrayAgg,
    exp.ArrayUniqueAgg,
    exp.ArgMax,
    exp.ArgMin,
    exp.Mode,
    exp.ApproxQuantile,
    exp.GroupConcat,
)
_PICKED_IN_READ_ORDER_CALLS = frozenset({"histogram_numeric", "hll_sketch_agg"})
_FLOATING = (exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE)


def _order_free(call: exp.Expr) -> bool:
    if _picked_in_read_order(call):  # PERCENTILE_APPROX is a kind of PERCENTILE to sqlglot
        return False
    if isinstance(call, _ORDER_FREE):
        return True
    if isinstance(call, exp.Avg):  # its running sum is DOUBLE unless its values are DECIMAL
        return call.this.is_type(exp.DataType.Type.DECIMAL)
    if isinstance(call, _EXACT_WHEN_TYPED):
        return call.type is not None and not call.is_type(exp.DataType.Type.UNKNOWN, *_FLOATING)
    return False


def _picked_in_read_order(call: exp.Expr) -> bool:
    if isinstance(call, exp.Anonymous):
        return call.name.lower() in _PICKED_IN_READ_ORDER_CALLS
    return isinstance(call, _PICKED_IN_READ_ORDER)


def _frame(w: exp.Window) -> tuple[str, str, str]:
    """(kind, start, end) of ``w``'s frame as Spark takes it: without ORDER BY every row
    is a peer, so the default frame is the whole partition."""
    spec = w.args.get("spec")
    if spec is None:
        return "RANGE", "UNBOUNDED", "UNBOUNDED" if w.args.get("order") is None else "CURRENT ROW"
    kind = str(spec.args.get("kind") or "").upper()
    start = str(spec.args.get("start") or "").upper()
    return kind, start, str(spec.args.get("end") or "CURRENT ROW").upper()


_POSITIONAL = (exp.RowNumber, exp.Ntile, exp.Lag, exp.Lead)


def _call(w: exp.Window) -> exp.Expr:
    """The function of ``w``, without its IGNORE / RESPECT NULLS."""
    return w.this.this if isinstance(w.this, exp.IgnoreNulls | exp.RespectNulls) else w.this


def _first_from_start(w: exp.Window) -> bool:
    """The first row of a frame that starts at the partition's first row (and ends at the
    current row or later): the partition's first row, whatever the frame's end."""
    _, start, end = _frame(w)
    return (
        isinstance(_call(w), exp.FirstValue | exp.First | exp.AnyValue)
        and not isinstance(w.this, exp.IgnoreNulls)
        and start == "UNBOUNDED"
        and end in ("CURRENT ROW", "UNBOUNDED")
    )


def breaks_ties(w: exp.Window) -> bool:
    """Whether ``w``'s answer depends on the order among rows tied in its ORDER BY (all rows
    of a partition, without ORDER BY) in a way an order that tells them apart fixes (see
    :func:`total_order`); raises when it depends on it in a way no such order fixes."""
    call = _call(w)
    kind, start, end = _frame(w)
    if isinstance(call, _POSITIONAL) or kind == "ROWS":
        return True
    if _order_free(call):
        return False  # peers share one value, whatever order they come in
    if start == "UNBOUNDED" and end == "UNBOUNDED":
        return True  # the whole partition: an order that tells rows apart keeps the frame
    if _first_from_start(w):
        return True  # every frame starts at the partition's first row
    if (start, end) in _RUNNING_FRAMES:
        return True  # computed in two steps, see in_two_steps
    if _picked_in_read_order(call):
        raise NotIncremental(
            "WINDOW_TIES",
            call_name(call).upper(),
            "picks among the rows tied in its ORDER BY in the order Spark reads them "
            f"(its RANGE frame from {start} to {end} holds peers of the current row); "
            "recomputed FULL. Over a ROWS frame, or a RANGE frame from the partition's "
            "start or to its end, it is maintained",
        )
    # a DOUBLE sum over a frame of a range of values rounds in the order peers come; a
    # recomputation that rounds otherwise disagrees with the table, and the refresh falls
    # back to FULL
    return False


# RANGE frames from the partition's start to the current row's last peer, and from its
# first peer to the partition's end: (start, end) as sqlglot reads them
_RUNNING_FRAMES = (("UNBOUNDED", "CURRENT ROW"), ("CURRENT ROW", "UNBOUNDED"))


def runs_over_peers(w: exp.Window) -> bool:
    """Whether ``w`` is a function that depends on the order it reads its frame in, over a
    RANGE frame from the partition's start to the current row's last peer (the default
    with ORDER BY) or from its first peer to the end: see :func:`in_two_steps`."""
    if w.args.get("order") is None:
        return False
    kind, start, end = _frame(w)
    call = _call(w)
    if kind == "ROWS" or (start, end) not in _RUNNING_FRAMES or isinstance(call, _POSITIONAL):
        return False
    return not (_order_free(call) or _first_from_start(w))


def _tie_breakers(w: exp.Window, breakers: list[exp.Expr]) -> list[exp.Ordered]:
    """``breakers`` as ORDER BY items, but those ``w`` already partitions or orders by."""
    keys = {p.sql("spark") for p in w.args.get("partition_by") or []}
    order = w.args.get("order")
    if order is not None:
        keys |= {o.this.sql("spark") for o in order.expressions}
    return [
        exp.Ordered(this=b.copy(), nulls_first=True) for b in breakers if b.sql("spark") not in keys
    ]


def _rows(start: str, end: str) -> exp.WindowSpec:
    """``ROWS BETWEEN start AND end``, each ``UNBOUNDED`` (at its end) or ``CURRENT ROW``."""
    return exp.WindowSpec(
        kind="ROWS",
        start=start,
        start_side="PRECEDING" if start == "UNBOUNDED" else None,
        end=end,
        end_side="FOLLOWING" if end == "UNBOUNDED" else None,
    )


def in_two_steps(
    w: exp.Window, breakers: list[exp.Expr], value: str, position: str
) -> tuple[exp.Window, exp.Window, exp.Window]:
    """``w`` (see :func:`runs_over_peers`) as the same function running over a ROWS frame
    in an order made total by ``breakers``, the row's ``position`` in that order, and the
    running ``value`` at the last (first) position among the row's peers.

    Over a RANGE frame a row's peers (equal in the ORDER BY) are all in its frame, read in
    whichever order Spark reads them: COLLECT_LIST lists them so, LAST_VALUE takes the
    last one read, a DOUBLE sum rounds as they come. Running through the partition in a
    total order, the value at the last of a peer group covers exactly the RANGE frame of
    each of its rows (from the start to the last peer), read in one order Spark could have
    taken. Rows equal in every column the query uses share a peer group and values, so
    which of them is last does not matter."""
    order = w.args["order"]
    partition = [p.copy() for p in w.args.get("partition_by") or []]
    total = exp.Order(
        expressions=[*(o.copy() for o in order.expressions), *_tie_breakers(w, breakers)]
    )
    _, start, end = _frame(w)
    from_start = start == "UNBOUNDED"
    running = w.copy()
    running.set("order", total.copy())
    running.set("spec", _rows(start, end))
    numbered = exp.Window(
        this=exp.RowNumber(), partition_by=[p.copy() for p in partition], order=total.copy()
    )
    pick = exp.ArgMax if from_start else exp.ArgMin
    at_peer = exp.Window(
        this=pick(this=col(value), expression=col(position)),
        partition_by=[*partition, *(o.this.copy() for o in order.expressions)],
    )
    return running, numbered, at_peer


def total_order(w: exp.Window, breakers: list[exp.Expr]) -> exp.Window:
    """``w`` with its order made total where the answer depends on the order among rows
    tied in it: ``breakers`` (the input's columns the query uses, a MAP as its entries)
    appended to its ORDER BY,
    or made its ORDER BY, over the same frame, when it has none.

    Spark numbers tied rows (ROW_NUMBER, NTILE), reads their neighbours (LAG, LEAD),
    counts positional frames (ROWS) and collects or picks values (COLLECT_LIST, FIRST,
    MAX_BY's ties) in whichever order it reads them, and that order changes between two
    reads of the same rows (another file layout after a compaction, another shuffle). A
    window's rule recomputes the touched partitions as they were, to remove what the
    table holds for them; read in another order, those are other rows than the table
    holds (a deduplication that kept row a of two tied rows removes b), and the refresh
    fell back to FULL, or a deleted row stayed in the table. Ordered by every column the
    query uses, tied rows are equal wherever they are read, so the table (built from the
    same plan by a FULL refresh) and every recomputation agree. Any such order is one
    Spark could have taken, so the answer stays the query's.

    Functions whose peers share one value (RANK, exact aggregates over RANGE frames) keep
    their order: breaking their ties would change the answer. FIRST_VALUE from the
    partition's start is the first row whatever the frame's end; LAST_VALUE, NTH_VALUE,
    COLLECT_LIST, MAX_BY and the like over a RANGE frame to the current row's last peer
    are computed in two steps (:func:`in_two_steps`), over a RANGE frame of a range of
    values refused (FULL recomputes all at once, one order)."""
    if not breakers or not breaks_ties(w):
        return w
    order = w.args.get("order")
    extra = _tie_breakers(w, breakers)
    if not extra:
        return w  # the partition's rows are equal in every column the query uses
    if order is not None:
        order.set("expressions", [*order.expressions, *extra])
        return w
    w.set("order", exp.Order(expressions=extra))
    kind, _, _ = _frame(w)
    if kind != "ROWS":  # ordered, the default frame would end at the current row
        w.set("spec", _rows("UNBOUNDED", "UNBOUNDED"))
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
