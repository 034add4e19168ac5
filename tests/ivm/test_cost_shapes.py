"""Which plans AUTO recomputes instead of maintaining, pure (no Spark): a window without
PARTITION BY over the sources' own rows re-ranks every row on any change, so its delta
rule would read the input twice; over an aggregate or a join it keeps its rule, because
recomputing would rescan the big tables the other rules keep from reading."""

from __future__ import annotations

import pytest

from dyntables.ivm.rules import ranks_all_rows
from dyntables.plan.build import build_plan
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
