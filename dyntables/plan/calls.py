"""Which calls are aggregates, and what the compiler does with each kind, pure; and how
the builder names a call and finds the calls of one SELECT.

sqlglot models most of Spark's aggregate functions as ``exp.AggFunc`` subclasses; some
it reads as plain calls (``try_sum``, ``every``, ...) and ANY as a quantified
comparison. The builder must know them all: a plain call taken for a scalar function
would be evaluated over the changed rows alone.
"""

from __future__ import annotations

from sqlglot import exp

# Spark's built-in aggregate functions that sqlglot reads as plain calls, and ANY, which
# it reads as a quantified comparison: without them a global ``SELECT try_sum(x) FROM t``
# looked like a projection, whose delta rule evaluated it over the changed rows alone
ANONYMOUS_AGGREGATES = frozenset(
    {
        "every",
        "some",
        "std",
        "mean",
        "try_sum",
        "try_avg",
        "histogram_numeric",
        "count_min_sketch",
        "hll_sketch_agg",
        "hll_union_agg",
    }
)

# the aggregates Spark lets skip NULLs (IGNORE NULLS, or a second argument true)
_TAKES_NULLS = (exp.First, exp.Last, exp.AnyValue, exp.FirstValue, exp.LastValue)

# Aggregates with no running state that undoes a delete (a variance, a median, an AND):
# kept per group in the state and recomputed from the current input for every group the
# change touches (see ivm/aggregate.py). Each with the arguments sqlglot models (a call
# with others set is refused, not computed without them).
#
# FIRST, LAST and ANY_VALUE take the row Spark reads first or last, COLLECT_LIST and
# COLLECT_SET list the values in the order it reads them, MAX_BY, MIN_BY and MODE pick
# among tied rows in that order, and PERCENTILE_APPROX's summary merges in that order:
# over the same rows two runs of the query may give two of its answers. The state keeps
# the answer the group was given, and a touched group gets one of the answers the query
# has for its new rows, as a FULL refresh would; an untouched group keeps its own.
RECOMPUTED_AGGS: dict[type[exp.Expr], frozenset[str]] = {
    **{
        t: frozenset({"this"})
        for t in (
            exp.Stddev,
            exp.StddevSamp,
            exp.StddevPop,
            exp.Variance,
            exp.VariancePop,
            exp.Skewness,
            exp.Kurtosis,
            exp.LogicalAnd,
            exp.LogicalOr,
            exp.BitwiseAndAgg,
            exp.BitwiseOrAgg,
            exp.BitwiseXorAgg,
            exp.Median,
        )
    },
    **{
        t: frozenset({"this", "expression"})
        for t in (
            exp.Corr,
            exp.CovarPop,
            exp.CovarSamp,
            exp.RegrAvgx,
            exp.RegrAvgy,
            exp.RegrCount,
            exp.RegrIntercept,
            exp.RegrR2,
            exp.RegrSlope,
            exp.RegrSxx,
            exp.RegrSxy,
            exp.RegrSyy,
        )
    },
    exp.Quantile: frozenset({"this", "quantile"}),
    exp.ApproxQuantile: frozenset({"this", "quantile", "accuracy"}),
    exp.ArgMax: frozenset({"this", "expression"}),
    exp.ArgMin: frozenset({"this", "expression"}),
    exp.Mode: frozenset({"this"}),
    **dict.fromkeys(_TAKES_NULLS, frozenset({"this"})),
    exp.ArrayAgg: frozenset({"this", "nulls_excluded"}),  # COLLECT_LIST
    exp.ArrayUniqueAgg: frozenset({"this"}),  # COLLECT_SET
    # HyperLogLog++ registers are the maximum over the rows' hashes: the estimate is a
    # function of the group's values, whatever their order or partitioning
    exp.ApproxDistinct: frozenset({"this", "accuracy"}),
}
# the same, among the aggregates sqlglot reads as plain calls: name -> arguments
RECOMPUTED_CALLS = {"std": 1, "every": 1, "some": 1, "try_sum": 1, "try_avg": 1}

# aggregates whose value over no rows is 0, not NULL
COUNTS = (exp.Count, exp.CountIf, exp.RegrCount, exp.ApproxDistinct)


def is_aggregate_call(n: exp.Expr) -> bool:
    if isinstance(n, (exp.AggFunc, exp.Any)):
        return True
    return isinstance(n, exp.Anonymous) and n.name.lower() in ANONYMOUS_AGGREGATES


def group_by_all_keys(items: list[exp.Expr]) -> list[exp.Expr]:
    """Spark's GROUP BY ALL: every select item (unaliased) that mentions no aggregate of
    its own SELECT; none: a global aggregate."""
    return [i.unalias() for i in items if not any(is_aggregate_call(n) for n in own_nodes(i))]


def mean_as_avg(n: exp.Expr) -> exp.Expr:
    """Spark's ``MEAN(x)`` (a plain call to sqlglot) is ``AVG(x)``, with AVG's rule."""
    inner = n.this if isinstance(n, exp.Filter) else n
    if not (
        isinstance(inner, exp.Anonymous)
        and inner.name.lower() == "mean"
        and len(inner.expressions) == 1
    ):
        return n
    avg = exp.Avg(this=inner.expressions[0].copy())
    if inner is n:
        return avg
    wrapped = n.copy()
    wrapped.set("this", avg)
    return wrapped


def recomputed_name(n: exp.Expr) -> str:
    """The name EXPLAIN gives a recomputed call: BOOL_AND, COLLECT_SET, SUM(DISTINCT)."""
    inner = n.this if isinstance(n, exp.Filter) else n
    name = inner.sql("spark").split("(", 1)[0].upper()
    if isinstance(inner.this, exp.Distinct):
        return f"{name}(DISTINCT)"
    return name


def recomputable(n: exp.Expr) -> bool:
    """An aggregate call (``FILTER (WHERE ...)`` included) recomputed per touched group:
    one of RECOMPUTED_AGGS / RECOMPUTED_CALLS with exactly the arguments sqlglot
    models, so the SQL generated from it is the call as written."""
    if isinstance(n, exp.IgnoreNulls | exp.RespectNulls):  # FIRST(x, true): kept whole
        inner = n.this.this if isinstance(n.this, exp.Filter) else n.this
        if not isinstance(inner, _TAKES_NULLS):
            return False
        n = n.this
    if isinstance(n, exp.Filter):
        n = n.this
    if isinstance(n, exp.Anonymous):
        expected = RECOMPUTED_CALLS.get(n.name.lower())
        return expected is not None and len(n.expressions) == expected
    allowed = RECOMPUTED_AGGS.get(type(n))
    if allowed is None:
        return False
    given = {k for k, v in n.args.items() if v is not None and v is not False}
    return "this" in given and given <= allowed


def call_name(n: exp.Expr) -> str:
    """A call's function name in lower case, as Spark knows it (``""``: not a call)."""
    if isinstance(n, exp.Anonymous):
        return n.name.lower()
    return n.sql_name().lower() if isinstance(n, exp.Func) else ""


def own_nodes(root: exp.Expr) -> list[exp.Expr]:
    """``root`` and its descendants, not descending into nested queries: one SELECT's own
    calls (a nested query's are built, with their own time buckets and aggregates, where
    its SELECT is)."""
    out: list[exp.Expr] = []
    stack = [root]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(
            c for c in n.iter_expressions() if not isinstance(c, (exp.Query, exp.Subquery))
        )
    return out


# calls returning one row's value of their first argument as it is (an aggregate's or a
# window function's): of a MAP's entries they return the entries of the MAP they return
_PICKS = (
    exp.First,
    exp.Last,
    exp.AnyValue,
    exp.ArgMax,
    exp.ArgMin,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
    exp.Lag,
    exp.Lead,
)


def picked_value(e: exp.Expr) -> exp.Expr | None:
    """The call in ``e`` (an aggregate call or a window function, maybe FILTERed or
    IGNORE NULLS) if it returns one row's value of its first argument as it is; None
    otherwise, also for LAG and LEAD with a default (a value of their own)."""
    n = e.this if isinstance(e, exp.Window) else e
    while isinstance(n, exp.IgnoreNulls | exp.RespectNulls | exp.Filter):
        n = n.this
    if not isinstance(n, _PICKS) or n.args.get("default") is not None:
        return None
    return n
