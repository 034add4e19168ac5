"""GROUP BY (and DISTINCT, global aggregates) maintained from per-group state.

State, one row per group: the keys, ``__cnt`` (the group's row count, i.e. the sum of
weights) and per aggregate what makes it maintainable under inserts *and* deletes:

  COUNT(*)         __cnt
  COUNT(x)         a<j>_n  non-null count
  SUM(x), AVG(x)   a<j>_n, a<j>_s  (sum over non-null x, in Spark's own SUM type)
  MIN(x), MAX(x)   a<j>_n, a<j>_m  (recomputed for a group only when its extreme is deleted)
  other            a<j>_v  the value (STDDEV, MEDIAN, BOOL_AND, ...: no running state
                   undoes a delete), recomputed for every group the change touches

A group disappears when ``__cnt`` reaches 0; SUM/AVG/MIN/MAX are NULL when ``a<j>_n``
is 0. The delta rows are expanded to +-1 rows first, so sums are exact in every exact
type (no multiplication that could widen a DECIMAL past 38 digits and round).

A DOUBLE/FLOAT sum is not a group: subtracting does not undo adding (1 + 2 + 1e17 - 1e17
is 0, NaN - NaN is NaN). So a floating sum is only ever *added to*: a group whose change
deletes a non-null value, or whose new sum cancels to a tiny fraction of what was added,
is flagged (``r_a<j>_s``) and its sum recomputed from the current input, like a deleted
MIN/MAX. The state then always holds what Spark's own SUM gives over the group, up to
the order of additions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sqlglot import exp

from dyntables.ivm.sqlb import (
    W,
    alias,
    cast,
    col,
    group_key,
    lit,
    null_safe_eq_all,
    raise_error,
    select,
    sub,
    union_all,
)
from dyntables.plan.ops import RECOMPUTED, AggCall, Aggregate
from dyntables.plan.render import spark_sql

CNT = "__cnt"
SIGN = "__s"
FLOATING = frozenset({"double", "float"})
# an inserted floating sum that cancels below this share of the magnitudes added is
# recomputed: its rounding error could be the whole result
CANCELLATION = 1e-6
INCONSISTENT = "dyntables: inconsistent aggregate state"
# a DECIMAL sum beyond DECIMAL(38)'s range is NULL in Spark (its SUM then even depends
# on the order of additions), and NULL state read as 0 would be wrong ever after: the
# refresh stops and recomputes (planner.SUM_OVERFLOW)
OVERFLOW = "dyntables: a DECIMAL sum overflowed"
# the running sum of an AVG over integers: Spark sums those in DOUBLE, which a BIGINT
# running sum (SUM's own type) would wrap around where Spark does not
EXACT_AVG_SUM = "decimal(38,0)"


@dataclass(frozen=True)
class Layout:
    """Names of a node's state columns."""

    keys: tuple[str, ...]
    aggs: tuple[tuple[AggCall, dict[str, str]], ...]

    @property
    def value_columns(self) -> list[str]:
        out = [CNT]
        for _, names in self.aggs:
            out.extend(names.values())
        return out

    @property
    def all_columns(self) -> list[str]:
        return list(self.keys) + self.value_columns


def layout(node: Aggregate) -> Layout:
    aggs = []
    for j, call in enumerate(node.aggs):
        names: dict[str, str] = {}
        if call.func in ("count", "sum", "avg", "min", "max"):
            names["n"] = f"a{j}_n"
        if call.func in ("sum", "avg"):
            names["s"] = f"a{j}_s"
        if call.func in ("min", "max"):
            names["m"] = f"a{j}_m"
        if call.func == "count_distinct":
            names["d"] = f"a{j}_d"
        if call.func == RECOMPUTED:
            names["v"] = f"a{j}_v"
        aggs.append((call, names))
    return Layout(tuple(f"k{i}" for i in range(len(node.keys))), tuple(aggs))


def supported(node: Aggregate) -> str | None:
    """None when this aggregate can be maintained; else a reason code."""
    return None


def distinct_calls(node: Aggregate) -> list[tuple[int, AggCall]]:
    """COUNT(DISTINCT x) calls: each keeps a multiplicity table (keys, v, cnt)."""
    return [(j, c) for j, c in enumerate(node.aggs) if c.func == "count_distinct"]


# -- building state from scratch (FULL) -------------------------------------------------------


def build_sql(
    node: Aggregate, child: exp.Query, integral_avgs: frozenset[str] = frozenset()
) -> exp.Select:
    """``integral_avgs``: the AVG calls (by column) over integers, whose running sum is
    kept as EXACT_AVG_SUM."""
    lay = layout(node)
    items: list[exp.Expr] = [
        alias(k.copy(), name) for k, name in zip(node.keys, lay.keys, strict=True)
    ]
    items.append(alias(exp.Count(this=exp.Star()), CNT))
    for call, names in lay.aggs:
        arg = call.arg.copy() if call.arg is not None else None
        if "n" in names:
            items.append(alias(exp.Count(this=arg.copy()), names["n"]))  # type: ignore[union-attr]
        if "s" in names:
            summed = arg.copy()  # type: ignore[union-attr]
            if call.column in integral_avgs:
                summed = cast(summed, EXACT_AVG_SUM)
            items.append(alias(exp.Sum(this=summed), names["s"]))
        if "m" in names:
            fn = exp.Min if call.func == "min" else exp.Max
            items.append(alias(fn(this=arg.copy()), names["m"]))  # type: ignore[union-attr]
        if "d" in names:
            items.append(alias(exp.Count(this=exp.Distinct(expressions=[arg.copy()])), names["d"]))  # type: ignore[union-attr]
        if "v" in names:
            items.append(alias(arg.copy(), names["v"]))  # type: ignore[union-attr]
    q = select(items, sub(child))
    if node.keys:
        q = q.group_by(*(group_key(k) for k in node.keys), copy=False)
    return q


def build_distinct_sql(node: Aggregate, call: AggCall, child: exp.Query) -> exp.Select:
    """Multiplicity of every (group, value) for one COUNT(DISTINCT value)."""
    lay = layout(node)
    arg = call.arg
    assert arg is not None
    items = [alias(k.copy(), name) for k, name in zip(node.keys, lay.keys, strict=True)]
    items += [alias(arg.copy(), "v"), alias(exp.Count(this=exp.Star()), CNT)]
    q = select(items, sub(child)).where(
        exp.Not(this=exp.Is(this=arg.copy(), expression=exp.null())), copy=False
    )
    return q.group_by(*(group_key(k) for k in node.keys), group_key(arg), copy=False)


def distinct_change_sql(
    node: Aggregate, call: AggCall, delta: exp.Query, state: exp.Query
) -> exp.Select:
    """Per touched (group, value): old and new multiplicity."""
    lay = layout(node)
    arg = call.arg
    assert arg is not None
    d_items = [alias(k.copy(), name) for k, name in zip(node.keys, lay.keys, strict=True)]
    d_items += [alias(arg.copy(), "v"), alias(exp.Sum(this=col(SIGN)), "d_" + CNT)]
    dq = (
        select(d_items, sub(signed_rows(delta)))
        .where(exp.Not(this=exp.Is(this=arg.copy(), expression=exp.null())), copy=False)
        .group_by(*(group_key(k) for k in node.keys), group_key(arg), copy=False)
    )
    names = [*lay.keys, "v"]
    on = null_safe_eq_all([col(n, "_d") for n in names], [col(n, "_o") for n in names])
    old = exp.func("coalesce", col(CNT, "_o"), lit(0))
    new = exp.Add(this=old.copy(), expression=col("d_" + CNT, "_d"))
    checked = exp.If(
        this=exp.LT(this=new, expression=lit(0)), true=raise_error(INCONSISTENT), false=new.copy()
    )
    items = [alias(col(n, "_d"), n) for n in names] + [
        alias(old, "o_" + CNT),
        alias(checked, "n_" + CNT),
    ]
    return select(items, sub(dq, "_d")).join(
        sub(select(["*"], sub(state)), "_o"), on=on, join_type="left"
    )


def distinct_count_delta_sql(node: Aggregate, call_index: int, change_view: str) -> exp.Select:
    """Per group: how many values appeared (0 -> n) minus how many vanished (n -> 0)."""
    lay = layout(node)
    gained = exp.If(
        this=exp.and_(
            exp.EQ(this=col("o_" + CNT), expression=lit(0)),
            exp.GT(this=col("n_" + CNT), expression=lit(0)),
        ),
        true=lit(1),
        false=exp.If(
            this=exp.and_(
                exp.GT(this=col("o_" + CNT), expression=lit(0)),
                exp.EQ(this=col("n_" + CNT), expression=lit(0)),
            ),
            true=lit(-1),
            false=lit(0),
        ),
    )
    items = [alias(col(k), k) for k in lay.keys] + [alias(exp.Sum(this=gained), f"dd{call_index}")]
    q = select(items, change_view)
    return q.group_by(*(col(k) for k in lay.keys), copy=False) if lay.keys else q


def distinct_rewrite_statement(node: Aggregate, table: str, change_view: str) -> str:
    lay = layout(node)
    names = [*lay.keys, "v"]
    cols = ", ".join([*names, CNT])
    on = spark_sql(null_safe_eq_all([col(n, "s") for n in names], [col(n, "c") for n in names]))
    return (
        f"INSERT OVERWRITE {table} SELECT {cols} FROM {table} s LEFT ANTI JOIN {change_view} c ON {on} "
        f"UNION ALL SELECT {', '.join(names)}, n_{CNT} AS {CNT} FROM {change_view} WHERE n_{CNT} > 0"
    )


def distinct_merge_statement(node: Aggregate, table: str, change_view: str) -> str:
    lay = layout(node)
    names = [*lay.keys, "v"]
    on = spark_sql(null_safe_eq_all([col(n, "t") for n in names], [col(n, "s") for n in names]))
    src = f"SELECT {', '.join(names)}, n_{CNT} AS {CNT} FROM {change_view}"
    cols = ", ".join([*names, CNT])
    values = ", ".join(f"s.{c}" for c in [*names, CNT])
    return (
        f"MERGE INTO {table} t USING ({src}) s ON {on} WHEN MATCHED AND s.{CNT} = 0 THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET t.{CNT} = s.{CNT} WHEN NOT MATCHED AND s.{CNT} > 0 THEN INSERT ({cols}) VALUES ({values})"
    )


# -- reading state ----------------------------------------------------------------------------


def finalize(
    call: AggCall, names: Mapping[str, str], avg_type: str | None, prefix: str = ""
) -> exp.Expr:
    """The aggregate's value from its state columns (``prefix`` picks o_/n_ copies)."""
    c = {role: col(prefix + name) for role, name in names.items()}
    if call.func == "count_star":
        return col(prefix + CNT)
    if call.func == "count":
        return c["n"]
    if call.func == "count_distinct":
        return c["d"]
    if call.func == RECOMPUTED:
        return c["v"]
    has_value = exp.GT(this=c["n"], expression=lit(0))
    if call.func == "sum":
        value: exp.Expr = c["s"]
    elif call.func in ("min", "max"):
        value = c["m"]
    elif avg_type and avg_type.startswith("decimal"):
        value = _decimal_average(c["s"], c["n"], avg_type)
    else:
        value = exp.Div(
            this=cast(c["s"].copy(), "double"),
            expression=cast(c["n"].copy(), "double"),
        )
    return exp.If(this=has_value, true=value, false=exp.null())


_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def _decimal_type(type_sql: str) -> tuple[int, int] | None:
    m = _DECIMAL.fullmatch(type_sql.strip().lower())
    return (int(m.group(1)), int(m.group(2))) if m else None


def exact_average(arg_type: str) -> bool:
    """Whether the AVG of a DECIMAL(p, s) argument is finalized exactly from its sum and
    count (``_decimal_average``), or must be recomputed from the group's rows. Spark
    divides the sum straight into the result type, DECIMAL(p + 4, s + 4), rounding half
    up once; a SQL division of the sum is typed by Spark's decimal rules instead, which
    round wide sums at fewer digits (AVG of a DECIMAL(38,10) at 10 digits, not 14). The
    exact finalization needs s <= 6 and at most min(29, 33 - s) integer digits; other
    types are rare, and recomputing their groups is exact by construction."""
    parsed = _decimal_type(arg_type)
    if parsed is None:
        return True  # not a DECIMAL: a DOUBLE average (or an integer one, summed exactly)
    precision, scale = parsed
    return scale <= 6 and precision - scale <= min(29, 33 - scale)


def _decimal_average(s: exp.Expr, n: exp.Expr, avg_type: str) -> exp.Expr:
    """sum / count rounded half up at the average's scale T, in steps whose types are the
    same under every setting of spark.sql.decimalOperations.allowPrecisionLoss:

      r = s % n                          exact, |r| < n
      I = (s - r) / n                    an integer, exact
      F = round_half_up(r * 10^T / n)    (2 r 10^T +- n) div 2n, integer division
      I + F * 10^-T                      exact in DECIMAL(38, T), then the result type

    The sum of the two parts is the average: s = I n + r, and I and r share a sign."""
    parsed = _decimal_type(avg_type)
    if (
        parsed is None
        or parsed[1] < 4
        or not exact_average(f"decimal({parsed[0] - 4},{parsed[1] - 4})")
    ):
        raise ValueError(
            f"an average of type {avg_type} cannot be finalized exactly from its state; "
            "it should have been recomputed (aggregate.exact_average)"
        )
    t = parsed[1]
    count = cast(n.copy(), "decimal(19,0)")
    rest = cast(exp.Mod(this=s.copy(), expression=count.copy()), f"decimal({19 + t - 4},{t - 4})")
    whole = cast(
        exp.Div(
            this=cast(exp.Sub(this=s.copy(), expression=rest.copy()), "decimal(38,0)"),
            expression=count.copy(),
        ),
        f"decimal({37 - t},0)",
    )
    scaled = cast(
        exp.Mul(
            this=rest.copy(),
            expression=cast(lit(10**t), f"decimal({t + 1},0)"),
        ),
        "decimal(38,0)",
    )
    half = exp.If(
        this=exp.LT(this=scaled.copy(), expression=lit(0)),
        true=exp.Neg(this=count.copy()),
        false=count.copy(),
    )
    doubled = exp.Add(this=exp.Mul(this=scaled, expression=lit(2)), expression=half)
    units = exp.IntDiv(
        this=exp.Paren(this=doubled), expression=exp.Mul(this=count.copy(), expression=lit(2))
    )
    fraction = exp.Mul(
        this=cast(units, f"decimal({t + 1},0)"),
        expression=cast(exp.Literal.string("1e-" + str(t)), f"decimal({t},{t})"),
    )
    return cast(exp.Add(this=whole, expression=fraction), avg_type)


def recompute_inexact_averages(node: Aggregate, arg_types: Mapping[str, str]) -> Aggregate:
    """``node`` with every AVG whose argument type (``arg_types``, by call column) has no
    exact finalization recomputed for the groups a change touches instead."""
    calls = tuple(
        AggCall(RECOMPUTED, exp.Avg(this=c.arg.copy()), c.column)
        if c.func == "avg" and c.arg is not None and not exact_average(arg_types.get(c.column, ""))
        else c
        for c in node.aggs
    )
    if all(a is b for a, b in zip(calls, node.aggs, strict=True)):
        return node
    return replace(node, aggs=calls)


def finalized(
    node: Aggregate, state: exp.Query, avg_types: Mapping[str, str], prefix: str = ""
) -> exp.Select:
    """The aggregate's output rows from state rows (value columns named ``prefix`` +
    state name; keys are never prefixed)."""
    lay = layout(node)
    items: list[exp.Expr] = [
        alias(col(k), out) for k, out in zip(lay.keys, node.key_columns, strict=True)
    ]
    for call, names in lay.aggs:
        items.append(alias(finalize(call, names, avg_types.get(call.column), prefix), call.column))
    q = select(items, sub(state))
    if node.keys:
        q = q.where(exp.GT(this=col(prefix + CNT), expression=lit(0)), copy=False)
    return q


# -- applying a delta ---------------------------------------------------------------------------


def signed_rows(delta: exp.Query) -> exp.Select:
    """Expand weighted rows to +-1 rows (``__s``) so sums never multiply."""
    expanded = select(
        ["*", alias(exp.Explode(this=exp.func("sequence", lit(1), exp.Abs(this=col(W)))), "__i")],
        sub(delta),
    )
    sign = exp.If(this=exp.GT(this=col(W), expression=lit(0)), true=lit(1), false=lit(-1))
    return select(["*", alias(sign, SIGN)], sub(expanded))


def delta_sql(
    node: Aggregate,
    delta: exp.Query,
    floating: frozenset[str] = frozenset(),
    state_types: Mapping[str, str] | None = None,
) -> exp.Select:
    """Per affected group: the change of every state column; for a floating sum also
    how many non-null values left (``x_``) and the magnitude added (``a_``). A sum adds
    its values in the state's own type (``state_types``), a DECIMAL one stopping the
    refresh when it overflows."""
    lay = layout(node)
    s = col(SIGN)
    items: list[exp.Expr] = [
        alias(k.copy(), name) for k, name in zip(node.keys, lay.keys, strict=True)
    ]
    items.append(alias(exp.Sum(this=s.copy()), "d_" + CNT))
    for call, names in lay.aggs:
        if call.arg is None or call.func == RECOMPUTED:
            continue
        arg = call.arg
        not_null = exp.Not(this=exp.Is(this=arg.copy(), expression=exp.null()))
        if "n" in names:
            items.append(
                alias(
                    exp.Sum(this=exp.If(this=not_null, true=s.copy(), false=lit(0))),
                    "d_" + names["n"],
                )
            )
        if "s" in names:
            state_type = (state_types or {}).get(names["s"])
            value = cast(arg.copy(), state_type) if state_type else arg
            signed = exp.If(
                this=exp.GT(this=s.copy(), expression=lit(0)),
                true=value.copy(),
                false=exp.Neg(this=exp.paren(value.copy())),
            )
            total: exp.Expr = exp.Sum(this=signed)
            if _decimal(state_type):  # NULL over non-null values: it overflowed
                overflowed = exp.and_(
                    exp.Is(this=total.copy(), expression=exp.null()),
                    exp.GT(this=exp.Count(this=arg.copy()), expression=lit(0)),
                )
                total = exp.If(this=overflowed, true=raise_error(OVERFLOW), false=total)
            items.append(alias(total, "d_" + names["s"]))
            if names["s"] in floating:
                gone = exp.and_(exp.LT(this=s.copy(), expression=lit(0)), not_null.copy())
                items.append(
                    alias(
                        exp.Sum(this=exp.If(this=gone, true=lit(1), false=lit(0))),
                        "x_" + names["s"],
                    )
                )
                added = exp.If(
                    this=exp.GT(this=s.copy(), expression=lit(0)),
                    true=exp.Abs(this=arg.copy()),
                    false=cast(lit(0), "double"),
                )
                items.append(alias(exp.Sum(this=added), "a_" + names["s"]))
        if "m" in names:
            fn = exp.Min if call.func == "min" else exp.Max
            ins = exp.If(
                this=exp.GT(this=s.copy(), expression=lit(0)), true=arg.copy(), false=exp.null()
            )
            dele = exp.If(
                this=exp.LT(this=s.copy(), expression=lit(0)), true=arg.copy(), false=exp.null()
            )
            items.append(alias(fn(this=ins), "i_" + names["m"]))
            items.append(alias(fn(this=dele), "x_" + names["m"]))
    q = select(items, sub(signed_rows(delta)))
    if node.keys:
        q = q.group_by(*(group_key(k) for k in node.keys), copy=False)
    return q


def change_sql(
    node: Aggregate,
    delta: exp.Query,
    state: exp.Query,
    state_types: Mapping[str, str],
    distinct_views: Mapping[int, str] | None = None,
) -> exp.Select:
    """Old (``o_``) and new (``n_``) state of every group the delta touches.

    ``r_<m>`` flags groups whose MIN/MAX must be recomputed: a deleted value reached the
    current extreme, so the new one cannot be derived from the state.
    """
    lay = layout(node)
    floating = floating_sums(node, state_types)
    d_alias, o_alias = "_d", "_o"
    dq = sub(delta_sql(node, delta, floating, state_types), d_alias)
    oq = sub(select(["*"], sub(state)), o_alias)
    on = null_safe_eq_all([col(k, d_alias) for k in lay.keys], [col(k, o_alias) for k in lay.keys])
    items: list[exp.Expr] = [alias(col(k, d_alias), k) for k in lay.keys]
    for name in lay.value_columns:
        items.append(alias(col(name, o_alias), "o_" + name))

    def add(o: exp.Expr, d: exp.Expr) -> exp.Add:
        return exp.Add(
            this=exp.func("coalesce", o, lit(0)), expression=exp.func("coalesce", d, lit(0))
        )

    new_cnt = add(col(CNT, o_alias), col("d_" + CNT, d_alias))
    checked = exp.If(
        this=exp.LT(this=new_cnt, expression=lit(0)),
        true=raise_error(INCONSISTENT),
        false=new_cnt.copy(),
    )
    items.append(alias(checked, "n_" + CNT))
    joins: list[tuple[exp.Expr, exp.Expr]] = []
    for j, (call, names) in enumerate(lay.aggs):
        if "d" in names:
            view = (distinct_views or {})[j]
            dd_alias = f"_dd{j}"
            total = add(col(names["d"], o_alias), col(f"dd{j}", dd_alias))
            items.append(alias(total, "n_" + names["d"]))
            dd_on = null_safe_eq_all(
                [col(k, d_alias) for k in lay.keys], [col(k, dd_alias) for k in lay.keys]
            )
            joins.append((exp.to_table(view).as_(dd_alias), dd_on))
            continue
        if "v" in names:
            # the old value as a placeholder: every touched group that keeps rows is
            # flagged and gets its value recomputed (patch_sql); a global aggregate's
            # one row always (over no rows REGR_COUNT is 0, not NULL)
            v_name = names["v"]
            no_rows = exp.EQ(this=new_cnt.copy(), expression=lit(0))
            placeholder = exp.If(this=no_rows, true=exp.null(), false=col(v_name, o_alias))
            items.append(alias(placeholder, "n_" + v_name))
            touched: exp.Expr = exp.Not(this=no_rows.copy()) if lay.keys else exp.true()
            items.append(alias(touched, "r_" + v_name))
            continue
        if "n" not in names:
            continue
        n_name = names["n"]
        new_n = add(col(n_name, o_alias), col("d_" + n_name, d_alias))
        items.append(alias(new_n, "n_" + n_name))
        empty = exp.EQ(this=new_n.copy(), expression=lit(0))
        if "s" in names:
            s_name = names["s"]
            summed = _sum_of_two(
                add(col(s_name, o_alias), col("d_" + s_name, d_alias)), state_types[s_name]
            )
            value: exp.Expr = cast(summed, state_types[s_name])
            if _decimal(state_types[s_name]):
                # NULL now (the addition overflowed) or before (the state had): unknown
                was = exp.and_(
                    exp.GT(this=col(n_name, o_alias), expression=lit(0)),
                    exp.Is(this=col(s_name, o_alias), expression=exp.null()),
                )
                gone = exp.or_(exp.Is(this=value.copy(), expression=exp.null()), was)
                value = exp.If(this=gone, true=raise_error(OVERFLOW), false=value)
            items.append(
                alias(exp.If(this=empty.copy(), true=exp.null(), false=value), "n_" + s_name)
            )
            flag: exp.Expr = exp.false()
            if s_name in floating:
                lost = exp.GT(
                    this=exp.func("coalesce", col("x_" + s_name, d_alias), lit(0)),
                    expression=lit(0),
                )
                magnitude = exp.Add(
                    this=exp.Abs(this=exp.func("coalesce", col(s_name, o_alias), lit(0))),
                    expression=exp.func("coalesce", col("a_" + s_name, d_alias), lit(0)),
                )
                cancelled = exp.LT(
                    this=exp.Abs(this=summed.copy()),
                    expression=exp.Mul(this=exp.Literal.number(CANCELLATION), expression=magnitude),
                )
                flag = exp.and_(exp.paren(exp.or_(lost, cancelled)), exp.Not(this=empty.copy()))
            items.append(alias(flag, "r_" + s_name))
        if "m" in names:
            m_name = names["m"]
            pick = exp.Least if call.func == "min" else exp.Greatest
            old_m, ins, dele = (
                col(m_name, o_alias),
                col("i_" + m_name, d_alias),
                col("x_" + m_name, d_alias),
            )
            reaches = exp.LTE if call.func == "min" else exp.GTE
            # a delta is not consolidated: a value it deletes may be one it also inserts
            # (a LEFT join's rows matched again beside the change that moved them), so a
            # group with no extreme before (all NULL, or new) that loses a value is
            # recomputed too; helper-27 saw MAX keep such a value
            recompute = exp.and_(
                exp.Not(this=exp.Is(this=dele.copy(), expression=exp.null())),
                exp.paren(
                    exp.or_(
                        exp.Is(this=old_m.copy(), expression=exp.null()),
                        reaches(this=dele.copy(), expression=old_m.copy()),
                    )
                ),
            )
            merged = pick(this=old_m.copy(), expressions=[ins.copy()])
            items.append(
                alias(exp.If(this=empty.copy(), true=exp.null(), false=merged), "n_" + m_name)
            )
            items.append(alias(exp.and_(recompute, exp.Not(this=empty.copy())), "r_" + m_name))
    q = select(items, dq).join(oq, on=on, join_type="left")
    for table, dd_on in joins:
        q = q.join(table, on=dd_on, join_type="left")
    return q


def _sum_of_two(total: exp.Add, state_type: str) -> exp.Expr:
    """``old + delta`` of a running sum, exact. Spark types the sum of two DECIMAL(38, s)
    as DECIMAL(38, s - 1) when s > 6 (it gives up a digit of scale to fit the carry), so
    the last digit was rounded away where Spark's SUM keeps it. Both operands are
    narrowed to DECIMAL(37, s), whose sum is a DECIMAL(38, s); an operand too large for
    that stops the refresh, which recomputes (SUM_OVERFLOW)."""
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", state_type.lower())
    if m is None or int(m[1]) < 38 or int(m[2]) <= 6:
        return total
    if int(m[2]) >= 38:  # no DECIMAL(37, 38) to narrow to
        return exp.If(this=exp.true(), true=raise_error(OVERFLOW), false=total)
    narrow = f"decimal(37,{m[2]})"
    bound = exp.Literal.number("1" + "0" * (37 - int(m[2])))
    operands = [total.this, total.expression]
    fits = exp.and_(
        *(exp.LT(this=exp.Abs(this=o.copy()), expression=bound.copy()) for o in operands)
    )
    narrowed = exp.Add(
        this=cast(operands[0].copy(), narrow),
        expression=cast(operands[1].copy(), narrow),
    )
    return exp.If(this=fits, true=narrowed, false=raise_error(OVERFLOW))


def _decimal(state_type: str | None) -> bool:
    return bool(state_type) and str(state_type).lower().startswith("decimal")


def recompute_flags(node: Aggregate) -> list[str]:
    """Flag columns of the change view: a MIN/MAX whose extreme was deleted, a floating
    SUM/AVG that lost a value or cancelled (always false for exact sums)."""
    out: list[str] = []
    for _, names in layout(node).aggs:
        out.extend("r_" + names[role] for role in ("m", "s", "v") if role in names)
    return out


def recomputes_all(node: Aggregate) -> bool:
    """Whether some aggregate is recomputed for every group the change touches."""
    return any(call.func == RECOMPUTED for call in node.aggs)


def floating_sums(node: Aggregate, state_types: Mapping[str, str]) -> frozenset[str]:
    """State columns of SUM/AVG kept as a DOUBLE (or FLOAT) running sum."""
    return frozenset(
        names["s"]
        for _, names in layout(node).aggs
        if "s" in names and state_types.get(names["s"], "").lower() in FLOATING
    )


def recompute_sql(node: Aggregate, child_new: exp.Query, change_view: str) -> exp.Select:
    """MIN/MAX, SUMs and recomputed aggregates from the current input, for the flagged
    groups only."""
    lay = layout(node)
    flags = recompute_flags(node)
    flagged = select([col(k) for k in lay.keys] or [alias(lit(1), "_one")], change_view).where(
        exp.or_(*(col(f) for f in flags))
    )
    key_names = [f"_rk{i}" for i in range(len(lay.keys))]
    restricted = select(["*"], sub(child_new))
    if node.keys:
        flagged = select(
            [alias(col(k), nm) for k, nm in zip(lay.keys, key_names, strict=True)], sub(flagged)
        )
        restricted = restricted.join(
            sub(flagged),
            on=null_safe_eq_all(list(node.keys), [col(nm) for nm in key_names]),
            join_type="left semi",
        )
    items: list[exp.Expr] = [
        alias(k.copy(), name) for k, name in zip(node.keys, lay.keys, strict=True)
    ]
    for call, names in lay.aggs:
        if "m" in names:
            fn = exp.Min if call.func == "min" else exp.Max
            items.append(alias(fn(this=call.arg.copy()), "m_" + names["m"]))  # type: ignore[union-attr]
        if "s" in names:
            items.append(alias(exp.Sum(this=call.arg.copy()), "m_" + names["s"]))  # type: ignore[union-attr]
        if "v" in names:
            items.append(alias(call.arg.copy(), "m_" + names["v"]))  # type: ignore[union-attr]
    q = select(items, sub(restricted))
    if node.keys:
        q = q.group_by(*(group_key(k) for k in node.keys), copy=False)
    return q


def patch_sql(node: Aggregate, change_view: str, recompute_view: str) -> exp.Select:
    """The change rows with recomputed MIN/MAX, floating sums and recomputed aggregates
    where flagged."""
    lay = layout(node)
    c, r = "_c", "_r"
    items: list[exp.Expr] = []
    patched = {
        "n_" + names[role]: names[role]
        for _, names in lay.aggs
        for role in ("m", "s", "v")
        if role in names
    }
    change_cols = (
        lay.keys
        + tuple("o_" + n for n in lay.value_columns)
        + tuple("n_" + n for n in lay.value_columns)
    )
    for name in change_cols:
        if name in patched:
            m = patched[name]
            items.append(
                alias(
                    exp.If(this=col("r_" + m, c), true=col("m_" + m, r), false=col(name, c)), name
                )
            )
        else:
            items.append(alias(col(name, c), name))
    on = null_safe_eq_all([col(k, c) for k in lay.keys], [col(k, r) for k in lay.keys])
    return select(items, exp.to_table(change_view).as_(c)).join(
        exp.to_table(recompute_view).as_(r), on=on, join_type="left"
    )


def merge_statement(node: Aggregate, state_table: str, change_view: str) -> str:
    """MERGE the new state of the touched groups; empty groups are deleted (a global
    aggregate keeps its single row)."""
    lay = layout(node)
    src = select(
        [alias(col(k), k) for k in lay.keys] + [alias(col("n_" + v), v) for v in lay.value_columns],
        change_view,
    )
    on = null_safe_eq_all([col(k, "t") for k in lay.keys], [col(k, "s") for k in lay.keys])
    sets = ", ".join(f"t.{v} = s.{v}" for v in lay.value_columns)
    names = ", ".join(lay.all_columns)
    values = ", ".join(f"s.{v}" for v in lay.all_columns)
    delete = f"WHEN MATCHED AND s.{CNT} = 0 THEN DELETE " if node.keys else ""
    return (
        f"MERGE INTO {state_table} t USING ({spark_sql(src)}) s ON {spark_sql(on)} "
        f"{delete}WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s.{CNT} <> 0 THEN INSERT ({names}) VALUES ({values})"
    )


def rewrite_statement(node: Aggregate, state_table: str, change_view: str) -> str:
    """The same update as :func:`merge_statement` as one overwrite of a small state:
    untouched groups as they were, touched groups with their new state."""
    lay = layout(node)
    cols = ", ".join(lay.all_columns)
    on = spark_sql(
        null_safe_eq_all([col(k, "s") for k in lay.keys], [col(k, "c") for k in lay.keys])
    )
    untouched = f"SELECT {cols} FROM {state_table} s LEFT ANTI JOIN {change_view} c ON {on}"
    if not node.keys:
        untouched = f"SELECT {cols} FROM {state_table} s WHERE FALSE"
    touched = ", ".join([*lay.keys, *(f"n_{v} AS {v}" for v in lay.value_columns)])
    keep = f" WHERE n_{CNT} <> 0" if node.keys else ""
    return f"INSERT OVERWRITE {state_table} {untouched} UNION ALL SELECT {touched} FROM {change_view}{keep}"


def output_delta_sql(node: Aggregate, change_view: str, avg_types: Mapping[str, str]) -> exp.Query:
    """-old row and +new row of every touched group (identical pairs cancel later)."""
    old = finalized(node, exp.select("*").from_(change_view), avg_types, prefix="o_")
    new = finalized(node, exp.select("*").from_(change_view), avg_types, prefix="n_")
    if not node.keys:  # a global aggregate's old row exists unless the state was just built
        old = old.where(exp.Not(this=exp.Is(this=col("o_" + CNT), expression=exp.null())))
    cols = [col(c) for c in node.columns]
    return union_all(
        [
            select([*cols, alias(lit(-1), W)], sub(old)),
            select([*cols, alias(lit(1), W)], sub(new)),
        ]
    )


# -- rebuilding a small aggregate from its state ------------------------------------------------
#
# An aggregate at the top of its query (under projections only) whose state is small is
# written whole: its new state is the old state's rows and the delta's per-group changes
# summed by group (a UNION ALL and one GROUP BY: no join), cached, then written to the
# state table and, finalized, to the dynamic table, side by side. Only additive state
# qualifies: counts and exact (integer, decimal) sums. MIN/MAX, COUNT(DISTINCT) and
# floating sums need their groups recomputed on deletes and take the general path.

OLD_TAG = "__old"


def rebuildable(node: Aggregate, state_types: Mapping[str, str]) -> bool:
    """Whether the node's new state is its old state plus the delta, group by group."""
    additive = all(call.func in ("count_star", "count", "sum", "avg") for call in node.aggs)
    return additive and not floating_sums(node, state_types)


def rebuild_sql(
    node: Aggregate, delta: exp.Query, state: exp.Query, state_types: Mapping[str, str]
) -> exp.Select:
    """Every group's old (``o_``) and new (``n_``) state, ``__had`` when the old state had
    the group: the old state's rows and the delta's per-group changes, summed by group."""
    lay = layout(node)
    values = lay.value_columns
    tag = exp.column(OLD_TAG)
    old_rows = select([*(col(c) for c in lay.all_columns), alias(exp.true(), OLD_TAG)], sub(state))
    changes = delta_sql(node, delta, state_types=state_types)
    change_rows = select(
        [
            *(col(k) for k in lay.keys),
            *(alias(col("d_" + v), v) for v in values),
            alias(exp.false(), OLD_TAG),
        ],
        sub(changes),
    )
    items: list[exp.Expr] = [col(k) for k in lay.keys]
    items.append(alias(exp.func("coalesce", exp.Max(this=tag.copy()), exp.false()), "__had"))
    for v in values:
        items.append(
            alias(exp.Max(this=exp.If(this=tag.copy(), true=col(v), false=exp.null())), "o_" + v)
        )
    new_cnt = exp.Sum(this=col(CNT))
    items.append(
        alias(
            exp.If(
                this=exp.LT(this=new_cnt, expression=lit(0)),
                true=raise_error(INCONSISTENT),
                false=new_cnt.copy(),
            ),
            "n_" + CNT,
        )
    )
    for _, names in lay.aggs:
        if "n" not in names:
            continue
        count = exp.Sum(this=col(names["n"]))
        items.append(alias(count, "n_" + names["n"]))
        if "s" in names:
            total: exp.Expr = cast(
                exp.Sum(this=exp.func("coalesce", col(names["s"]), lit(0))), state_types[names["s"]]
            )
            if _decimal(state_types[names["s"]]):
                # the old sum overflowed (NULL over values; a change row with values
                # always has a sum, delta_sql stops on its overflow): an untouched group
                # keeps its NULL, a touched one is unknown; a new NULL overflowed now
                def any_row(condition: exp.Expr) -> exp.Expr:
                    flag = exp.If(this=condition, true=lit(1), false=lit(0))
                    return exp.GT(this=exp.Max(this=flag), expression=lit(0))

                was = any_row(
                    exp.and_(
                        exp.Is(this=col(names["s"]), expression=exp.null()),
                        exp.GT(this=col(names["n"]), expression=lit(0)),
                    )
                )
                touched = any_row(exp.Not(this=tag.copy()))
                now = exp.Is(this=total.copy(), expression=exp.null())
                total = exp.If(
                    this=was,
                    true=exp.If(this=touched, true=raise_error(OVERFLOW), false=exp.null()),
                    false=exp.If(this=now, true=raise_error(OVERFLOW), false=total),
                )
            empty = exp.EQ(this=count.copy(), expression=lit(0))
            items.append(alias(exp.If(this=empty, true=exp.null(), false=total), "n_" + names["s"]))
    q = select(items, sub(union_all([old_rows, change_rows])))
    return q.group_by(*(col(k) for k in lay.keys), copy=False) if lay.keys else q


def rebuilt_state_statement(node: Aggregate, state_table: str, rebuild: exp.Query) -> str:
    """Overwrite the state with the new state (``rebuild``: :func:`rebuild_sql`) of every
    group that still has rows (a global aggregate keeps its single row)."""
    lay = layout(node)
    items = [col(k) for k in lay.keys] + [alias(col("n_" + v), v) for v in lay.value_columns]
    q = select(items, sub(rebuild))
    if node.keys:
        q = q.where(exp.NEQ(this=col("n_" + CNT), expression=lit(0)), copy=False)
    return f"INSERT OVERWRITE {state_table} {spark_sql(q)}"


def rebuilt_row_counts(node: Aggregate, avg_types: Mapping[str, str]) -> tuple[exp.Expr, exp.Expr]:
    """(rows inserted, rows deleted) of the aggregate's output, over the rebuild's rows:
    a group whose finalized row changed loses its old row (if it had one) and gains its
    new one (if it has one). Exact as long as what lies above the aggregate shows each
    of its columns as it is (then two groups never share an output row)."""
    lay = layout(node)
    had: exp.Expr
    if node.keys:
        had = exp.GT(this=exp.func("coalesce", col("o_" + CNT), lit(0)), expression=lit(0))
        has: exp.Expr = exp.GT(this=col("n_" + CNT), expression=lit(0))
    else:
        had, has = col("__had"), exp.true()
    same = [
        exp.NullSafeEQ(
            this=finalize(call, names, avg_types.get(call.column), "o_"),
            expression=finalize(call, names, avg_types.get(call.column), "n_"),
        )
        for call, names in lay.aggs
    ]
    changed = exp.Not(this=exp.paren(exp.and_(had.copy(), has.copy(), *same)))

    def count_if(*conditions: exp.Expr) -> exp.Expr:  # 0, not NULL, over no rows
        counted = exp.Sum(this=exp.If(this=exp.and_(*conditions), true=lit(1), false=lit(0)))
        return exp.func("coalesce", counted, lit(0))

    return count_if(has, changed), count_if(had, changed.copy())
