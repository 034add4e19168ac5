"""Which plans AUTO recomputes instead of maintaining, pure (no Spark): a window without
PARTITION BY over the sources' own rows re-ranks every row on any change, so its delta
rule would read the input twice; over an aggregate or a join it keeps its rule, because
recomputing would rescan the big tables the other rules keep from reading. And which
joins and windows are worth weighing at refresh time (a join's delta may read a large
unchanged side, a partitioned window's the partitions of a large input, twice)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dyntables.ivm import rules
from dyntables.ivm.cost import reads_large_input
from dyntables.ivm.rules import ranks_all_rows
from dyntables.plan.build import build_plan
from dyntables.plan.ops import Aggregate, Scan, walk_post_order
from tests.plan.test_build import SCHEMA
from tests.plan.test_query import qualify


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # the seeds' leaderboard over another dynamic table (a scan here)
        ("SELECT k, RANK() OVER (ORDER BY n DESC) AS r FROM t0", True),
        (
            "SELECT * FROM (SELECT k, RANK() OVER (ORDER BY n) AS r FROM t0 WHERE z > 0) WHERE r <= 3",
            True,
        ),
        (
            "SELECT k, ROW_NUMBER() OVER (ORDER BY k) AS r FROM (SELECT k FROM t0 UNION ALL SELECT k FROM t1)",
            True,
        ),
        # partitioned: only the touched partitions are recomputed
        ("SELECT k, RANK() OVER (PARTITION BY k ORDER BY n) AS r FROM t0", False),
        # over an aggregate or a join: recomputing would rescan the tables below
        (
            "SELECT k, RANK() OVER (ORDER BY s DESC) AS r FROM (SELECT k, SUM(n) AS s FROM t0 GROUP BY k)",
            False,
        ),
        ("SELECT t0.k, RANK() OVER (ORDER BY t0.n) AS r FROM t0 JOIN t1 ON t0.k = t1.k", False),
        # no window at the top
        ("SELECT k, n FROM t0", False),
        (
            "SELECT k, COUNT(*) AS c FROM (SELECT k, RANK() OVER (ORDER BY n) AS r FROM t0) GROUP BY k",
            False,
        ),
    ],
)
def test_auto_recomputes_only_a_window_over_all_of_the_sources_rows(
    sql: str, expected: bool
) -> None:
    assert ranks_all_rows(build_plan(sql, SCHEMA, qualify).root) is expected


def _rows(big: int) -> Callable[[Scan], int | None]:
    return lambda scan: big if scan.table.parts[-1] == "t0" else 10


@pytest.mark.parametrize(
    ("sql", "changed", "expected"),
    [
        # t1 changed: its term reads t0 (large) within the change's keys: worth estimating
        ("SELECT t0.n, t1.s FROM t0 JOIN t1 ON t0.k = t1.k", {"t1"}, True),
        # t0 changed: its term reads only the small t1
        ("SELECT t0.n, t1.s FROM t0 JOIN t1 ON t0.k = t1.k", {"t0"}, False),
        # under an aggregate, the same
        ("SELECT t1.s, SUM(t0.n) AS x FROM t0 JOIN t1 ON t0.k = t1.k GROUP BY t1.s", {"t1"}, True),
        # above an aggregate: its change meets t0's rows
        (
            "SELECT a.k, a.x, t0.n FROM (SELECT k, COUNT(*) AS x FROM t1 GROUP BY k) a JOIN t0 ON a.k = t0.k",
            {"t1"},
            True,
        ),
        # the join below the aggregate reads t1 only (small); the one above is not a join
        (
            "SELECT s, COUNT(*) AS c FROM (SELECT t1.s FROM t1 JOIN t0 ON t0.k = t1.k) GROUP BY s",
            {"t0"},
            False,
        ),
        # no join
        ("SELECT k, n FROM t0 WHERE z > 0", {"t0"}, False),
        # a deduplication of a large table: the partitions the change touches, twice
        (
            "SELECT k, n FROM (SELECT k, n, ROW_NUMBER() OVER (PARTITION BY k ORDER BY n) AS r FROM t0) WHERE r = 1",
            {"t0"},
            True,
        ),
        # ... of a small one, changed, beside a large one unchanged: nothing to weigh
        (
            "SELECT k, RANK() OVER (PARTITION BY k ORDER BY s) AS r FROM t1 UNION ALL SELECT k, 1 FROM t0",
            {"t1"},
            False,
        ),
    ],
)
def test_auto_weighs_a_join_or_window_only_when_its_delta_reads_a_large_input(
    sql: str, changed: set[str], expected: bool
) -> None:
    plan = build_plan(sql, SCHEMA, qualify)
    names = {f"lakehouse.public.{t}" for t in changed}
    # the statements a refresh runs: each aggregate's input, and the root
    tops = [plan.root] + [n.child for n in walk_post_order(plan.root) if isinstance(n, Aggregate)]

    def weighed(rows: Callable[[Scan], int | None]) -> bool:
        return any(reads_large_input(top, names, rows) for top in tops)

    assert weighed(_rows(rules.PRUNE_MIN_ROWS)) is expected
    # below the pruning size nothing is weighed
    assert weighed(_rows(rules.PRUNE_MIN_ROWS - 11)) is False
