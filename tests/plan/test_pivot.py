"""PIVOT compiled as the GROUP BY Spark computes for it (plan/pivot.py), pure. Its
results are checked against Spark by the corpus (pivot-as-group-by.scn)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from dyntables.plan.build import build_plan
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import Aggregate, Filter, Generate, Project, walk_post_order
from tests.plan.test_build import SCHEMA
from tests.plan.test_query import qualify


def _aggregate_and_cells(sql: str) -> tuple[Aggregate, list[exp.Expr]]:
    plan = build_plan(sql, SCHEMA, qualify)
    nodes = walk_post_order(plan.root)
    (agg,) = [n for n in nodes if isinstance(n, Aggregate)]
    above = [n for n in nodes if isinstance(n, Project) and n.child is agg]
    return agg, list(above[0].exprs) if above else []


def test_a_pivot_of_numbers_is_null_where_a_group_lacks_the_value() -> None:
    """Every result a number: Spark aggregates per (group, value) and places the
    results, so a cell with no rows is NULL, a COUNT's too: guarded by the cell's rows."""
    agg, cells = _aggregate_and_cells(
        "SELECT * FROM (SELECT k, n, z FROM t0) PIVOT (SUM(n) AS s, COUNT(*) AS c FOR k IN (1, 2))"
    )
    assert len(agg.keys) == 1  # z: neither pivoted nor aggregated
    assert [a.func for a in agg.aggs].count("count") >= 2  # each cell's rows counted
    guarded = [c for c in cells if c.find(exp.GT)]
    assert len(guarded) == 4


def test_a_pivot_with_a_string_result_counts_zero_where_a_group_lacks_the_value() -> None:
    """A string among the results: Spark filters every aggregate's input instead, and a
    COUNT over no rows is 0: no guard."""
    agg, cells = _aggregate_and_cells(
        "SELECT * FROM t1 PIVOT (COUNT(*) AS c, MAX(s) AS m FOR k IN (1, 2, NULL))"
    )
    assert agg.keys == ()  # t1 has no other column: one row
    assert sorted(a.func for a in agg.aggs) == ["count"] * 3 + ["max"] * 3
    assert not any(c.find(exp.GT) for c in cells)


@pytest.mark.parametrize(
    "values",
    [
        "1, 1.0",  # one value twice once cast
        "1.5",  # an INT column: cast truncates, could meet another value
        "'1'",  # a string for an INT column
        "1, 2 AS x, 1 AS y",
    ],
)
def test_pivot_values_that_could_cast_to_one_value_refresh_full(values: str) -> None:
    with pytest.raises(NotIncremental) as err:
        build_plan(f"SELECT * FROM t1 PIVOT (COUNT(*) FOR k IN ({values}))", SCHEMA, qualify)
    assert err.value.code == "PIVOT"


def test_an_unpivot_is_a_lateral_view_named_as_written() -> None:
    """Qualifying lower-cases identifiers; the rows carry the names as written."""
    plan = build_plan(
        "SELECT * FROM (SELECT k, n, z FROM t0) UNPIVOT (v FOR c IN (N, z AS `Zed`))",
        SCHEMA,
        qualify,
    )
    (generate,) = [n for n in walk_post_order(plan.root) if isinstance(n, Generate)]
    names = [s.expressions[0].this.this for s in generate.call.find_all(exp.Struct)]
    assert names == ["N", "Zed"]
    assert [type(n).__name__ for n in walk_post_order(plan.root)].count("Filter") == 1
    with_nulls = build_plan(
        "SELECT * FROM (SELECT k, n, z FROM t0) UNPIVOT INCLUDE NULLS (v FOR c IN (n, z))",
        SCHEMA,
        qualify,
    )
    assert not any(isinstance(n, Filter) for n in walk_post_order(with_nulls.root))
