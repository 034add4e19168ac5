"""Which deltas and rows a refresh computes once (pure, no Spark): a full join's or a
semi/anti join's rules read their input's delta in two terms, so a chain of such joins
would repeat the bottom delta 2^n times unless each join's input delta is shared.
Decorrelated subqueries put a projection between the joins of a chain; the projection
over a join is shared too. A LEFT or RIGHT join whose other side changed reads its kept
side once, at the change's keys, and shares those rows between its two terms."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from sqlglot import exp

from dyntables.ivm.rules import NEW, Renderer
from dyntables.ivm.sqlb import select
from dyntables.plan.build import build_plan
from dyntables.plan.ops import Join, Node, Project, Scan, walk_post_order
from tests.plan.test_build import SCHEMA
from tests.plan.test_query import qualify


class FakeSources:
    """Every scan's delta is a view ``delta_<table>``; old and new rows the table itself."""

    def scan_rel(self, scan: Scan, version: str) -> exp.Query:
        name = scan.table.parts[-1] + ("" if version == NEW else "_old")
        return select([exp.column(c) for c in scan.columns], exp.to_table(name))

    def scan_delta(self, scan: Scan) -> exp.Query | None:
        cols = [exp.column(c) for c in scan.columns] + [exp.column("__w")]
        return select(cols, exp.to_table(f"delta_{scan.table.parts[-1]}"))

    def column_types(self, node: Node) -> Mapping[str, str]:
        return dict.fromkeys(node.columns, "string")

    def source_rows(self, scan: Scan) -> int | None:
        return 10

    def delta_bounds(self, scan: Scan, column: str) -> tuple[exp.Expr, exp.Expr] | None:
        return None


def _render(sql: str) -> tuple[str, list[str]]:
    shared: list[str] = []

    def share(delta: exp.Query) -> exp.Query:
        shared.append(delta.sql("spark"))
        return select(["*"], exp.to_table(f"shared{len(shared) - 1}"))

    plan = build_plan(sql, SCHEMA, qualify)
    out = Renderer(FakeSources(), share=share).delta(plan.root)
    assert out is not None
    return out.sql("spark"), shared


CHAIN = (
    "SELECT a.k, a.s, b.s AS s2 FROM (SELECT t0.k, t1.s FROM t0 LEFT JOIN t1 ON t0.k = t1.k) a "
    "FULL OUTER JOIN t1 b ON a.k = b.k"
)


def test_a_projection_over_a_join_is_shared_by_the_outer_join_above() -> None:
    plan = build_plan(CHAIN, SCHEMA, qualify)
    top = [n for n in walk_post_order(plan.root) if isinstance(n, Join)][-1]
    assert isinstance(top.left, Project) and isinstance(
        top.left.child, Join
    )  # the shape under test
    sql, shared = _render(CHAIN)
    # the lower join's delta is rendered once (inside a shared view), not per term above
    deltas = [i for i, q in enumerate(shared) if "delta_t0" in q]
    assert len(deltas) == 1 and "LEFT" in shared[deltas[0]].upper()
    assert sql.count("delta_t0") == 0
    assert f"shared{deltas[0]}" in sql


def test_a_projection_over_a_scan_is_not_shared() -> None:
    sql, shared = _render(
        "SELECT a.k, b.s FROM (SELECT k FROM t0 WHERE n > 0) a FULL OUTER JOIN t1 b ON a.k = b.k"
    )
    assert shared == []
    assert "delta_t0" in sql


@pytest.mark.parametrize(
    ("sql", "kept"),
    [
        ("SELECT t0.k, t1.s FROM t0 LEFT JOIN t1 ON t0.k = t1.k", "t0"),
        ("SELECT t0.k, t1.s FROM t0 RIGHT JOIN t1 ON t0.k = t1.k AND t0.n > 1", "t1"),
    ],
)
def test_an_outer_join_reads_its_kept_side_once_at_the_other_sides_changed_keys(
    sql: str, kept: str
) -> None:
    out, shared = _render(sql)
    other = "t1" if kept == "t0" else "t0"
    # the kept side's old rows at the other side's changed (non-NULL) keys, once
    assert len(shared) == 1
    assert f"FROM {kept}_old" in shared[0] and f"delta_{other}" in shared[0]
    assert "SEMI JOIN" in shared[0] and "IS NULL" in shared[0]
    assert out.count("shared0") == 2
    # beside them: the kept side's delta once, never the kept side in full
    assert out.count(f"delta_{kept}") == 1
    assert f"FROM {kept})" not in out and f"FROM {kept}_old" not in out
    # padded and matched alike: both terms join the other side old and new as the query does
    join = "LEFT JOIN" if kept == "t0" else "RIGHT JOIN"
    assert out.count(join) == 3
    assert f"FROM {other}_old" in out and f"FROM {other})" in out
