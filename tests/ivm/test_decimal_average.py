"""A DECIMAL average finalized from its sum and count equals Spark's AVG, digit for digit.

Spark's AVG divides the sum straight into DECIMAL(p + 4, s + 4); a plain SQL division of
the sum is typed by Spark's decimal rules and, for wide types, rounded at fewer digits
(AVG of a DECIMAL(38,10) at 10 digits, not 14). Checked over groups whose exact averages
sit next to a rounding boundary, with both settings of allowPrecisionLoss, and ANSI on.
"""

from __future__ import annotations

import random

import pytest
from sqlglot import exp

from dyntables import Lakehouse
from dyntables.ivm.aggregate import _decimal_average, exact_average, recompute_inexact_averages
from dyntables.plan.render import spark_sql

# (precision, scale) of the argument: each within exact_average's domain, edges included
TYPES = [(10, 2), (18, 2), (5, 0), (29, 0), (33, 4), (33, 6), (12, 6), (20, 5)]


def _values(rng: random.Random, precision: int, scale: int) -> list[str]:
    """Values of one group: big and small, both signs, and the group's size chosen so
    the average has digits past its scale (3, 7, 9, 11 rows)."""
    digits = precision - scale
    n = rng.choice([1, 2, 3, 7, 9, 11, 64])
    out = []
    for _ in range(n):
        whole = rng.choice([0, 1, 10 ** max(0, digits - 1) - 1, rng.randrange(10**digits)])
        frac = rng.randrange(10**scale) if scale else 0
        sign = rng.choice(["", "-"]) if rng.random() < 0.3 else ""
        out.append(f"{sign}{whole}.{frac:0{scale}d}" if scale else f"{sign}{whole}")
    return out


@pytest.mark.parametrize(
    ("allow_loss", "ansi"), [("true", "false"), ("false", "false"), ("true", "true")]
)
def test_finalized_decimal_averages_equal_sparks(lh: Lakehouse, allow_loss: str, ansi: str) -> None:
    spark = lh.spark
    rng = random.Random(20261127)
    rows = []
    for precision, scale in TYPES:
        assert exact_average(f"decimal({precision},{scale})")
        for group in range(12):
            for v in _values(rng, precision, scale):
                rows.append(f"('{precision},{scale}', {group}, '{v}')")
    keys = {
        "spark.sql.decimalOperations.allowPrecisionLoss": allow_loss,
        "spark.sql.ansi.enabled": ansi,
    }
    before = {k: spark.conf.get(k) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        for precision, scale in TYPES:
            t = f"decimal({precision},{scale})"
            data = (
                f"SELECT g, CAST(v AS {t}) AS x FROM VALUES {', '.join(rows)} AS d(ty, g, v) "
                f"WHERE ty = '{precision},{scale}'"
            )
            avg_type = spark.sql(f"SELECT AVG(x) AS a FROM ({data})").schema[0].dataType
            ours = _decimal_average(exp.column("s"), exp.column("n"), avg_type.simpleString())
            compared = spark.sql(
                f"SELECT g, a, {spark_sql(ours)} AS f FROM ("
                f"SELECT g, AVG(x) AS a, SUM(x) AS s, COUNT(x) AS n FROM ({data}) GROUP BY g)"
            ).collect()
            wrong = [(r.g, r.a, r.f) for r in compared if r.a != r.f]
            assert not wrong, f"{t}: AVG differs from the finalized sum/count in {wrong}"
            assert all(r.f is not None for r in compared)
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)


def test_the_exact_domain() -> None:
    assert exact_average("decimal(10,2)") and exact_average("double") and exact_average("int")
    assert exact_average("decimal(33,6)") and exact_average("decimal(29,0)")
    assert not exact_average("decimal(30,0)") and not exact_average("decimal(34,6)")
    # wider: their averages are recomputed from the group's rows
    assert not exact_average("decimal(38,10)")  # scale past 6
    assert not exact_average("decimal(30,18)")
    assert not exact_average("decimal(38,2)")  # 36 integer digits


def test_an_inexact_average_is_recomputed_and_the_plan_rebuilt() -> None:
    from dyntables.plan.ops import RECOMPUTED, AggCall, Aggregate, Filter, Scan, replace_nodes
    from dyntables.sql.tokens import TableName

    scan = Scan(TableName(("c", "d", "t")), ("a", "b"), ("c0", "c1"))
    node = Aggregate(
        scan,
        (),
        (),
        (AggCall("avg", exp.column("c0"), "c2"), AggCall("avg", exp.column("c1"), "c3")),
    )
    root = Filter(node, exp.true())
    rebuilt = recompute_inexact_averages(node, {"c2": "decimal(38,10)", "c3": "decimal(10,2)"})
    assert [c.func for c in rebuilt.aggs] == [RECOMPUTED, "avg"]
    assert rebuilt.aggs[0].arg.sql("spark") == "AVG(c0)"
    assert recompute_inexact_averages(rebuilt, {"c3": "decimal(10,2)"}) is rebuilt
    new_root = replace_nodes(root, {id(node): rebuilt})
    assert isinstance(new_root, Filter) and new_root.child is rebuilt and new_root is not root
    assert replace_nodes(root, {}) is root
