"""Where a rule reads a large input only within its change's range of a key (pure, no
Spark): the range is the source change's, so the key must carry the source's values to
the rule unchanged and every row of the change must hold one of them. A window's change
holds every row of a touched partition: only its partition keys do."""

from __future__ import annotations

import pytest
from sqlglot import exp

from dyntables.ivm.rules import Renderer
from dyntables.plan.build import build_plan
from dyntables.plan.ops import Scan
from tests.ivm.test_rules_sharing import FakeSources
from tests.plan.test_build import SCHEMA
from tests.plan.test_query import qualify


class LargeSources(FakeSources):
    """Sources too large to read whole; the range of column c of table t's change is
    lo_t_c..hi_t_c."""

    def source_rows(self, scan: Scan) -> int | None:
        return 10**9

    def delta_bounds(self, scan: Scan, column: str) -> tuple[exp.Expr, exp.Expr] | None:
        name = f"{scan.table.parts[-1]}_{scan.source_columns[scan.columns.index(column)]}"
        return exp.column(f"lo_{name}"), exp.column(f"hi_{name}")


def _delta(sql: str) -> str:
    out = Renderer(LargeSources()).delta(build_plan(sql, SCHEMA, qualify).root)
    assert out is not None
    return out.sql("spark")


@pytest.mark.parametrize(
    ("partition", "pruned"),
    [("k", True), ("n", False)],  # n: a changed row moves c of rows with any k
)
def test_a_join_over_a_window_is_pruned_by_the_windows_partition_key_only(
    partition: str, pruned: bool
) -> None:
    sql = (
        f"SELECT w.k, w.c, t1.s FROM (SELECT k, n, COUNT(*) OVER (PARTITION BY {partition}) "
        "AS c FROM t0) AS w JOIN t1 ON w.k = t1.k"
    )
    assert ("lo_t0_k" in _delta(sql)) is pruned


def test_windows_stacked_over_other_keys_are_not_pruned_by_the_lower_ones_change() -> None:
    """The outer window's partitions by z are those whose rows the inner window changed,
    whatever z the source's change had."""
    sql = (
        "SELECT k, z, c, COUNT(*) OVER (PARTITION BY z) AS b FROM "
        "(SELECT k, n, z, COUNT(*) OVER (PARTITION BY k) AS c FROM t0) AS i"
    )
    delta = _delta(sql)
    assert "lo_t0_z" not in delta
    assert "lo_t0_k" in delta  # the inner window itself reads its input within k's range
