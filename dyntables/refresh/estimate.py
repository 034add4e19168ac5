"""AUTO's read estimate: the source rows a delta would read against the rows a recompute
reads, both from Spark's optimized plans.

Each Iceberg scan of an optimized plan carries the record count of the files it will
read once the pushed filters pruned them (the delta rules' key-range filters included),
so the estimate costs file planning and no Spark job. It exists for joins
(``ivm.cost``): TPC-H SF 1's join queries, whose new orders land all over the key space,
refreshed incrementally in 1.4-2x the time of a recompute, reading as many rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# leaves of an optimized plan that read no source file: a relation the optimizer proved
# empty, and a cached change (its capture's reads are counted from snapshot summaries)
_NO_SOURCE_READ = frozenset({"LocalRelation", "OneRowRelation", "InMemoryRelation"})


@dataclass(frozen=True)
class ReadEstimate:
    """Source rows the delta reads, and the rows a recompute reads and then writes (it
    rewrites the whole table: a join whose delta reads a large side whole may still be
    cheaper than recomputing a large result)."""

    delta_rows: int
    full_rows: int
    full_write_rows: int = 0

    @property
    def full_cost(self) -> int:
        return self.full_rows + self.full_write_rows


class RecomputeCheaper(Exception):
    """AUTO: the delta would read too much; the refresh recomputes instead (raised
    before anything is written)."""

    def __init__(self, estimate: ReadEstimate) -> None:
        super().__init__(
            f"the delta reads {estimate.delta_rows} source rows, a recompute {estimate.full_rows}"
        )
        self.estimate = estimate


def planned_rows(spark: Any, sql: str) -> int | None:
    """Source rows the optimized plan of ``sql`` reads: the sum of its Iceberg scans'
    record counts after file pruning (None when a leaf's count is unknown)."""
    plan = spark.sql(sql)._jdf.queryExecution().optimizedPlan()
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        kind = leaf.getClass().getSimpleName()
        if kind in _NO_SOURCE_READ:
            continue
        count = leaf.stats().rowCount()
        if kind != "DataSourceV2ScanRelation" or not count.isDefined():
            return None
        total += int(str(count.get()))
    return total


class ReadWeigher:
    """AUTO's estimate over one refresh: the statements the delta rules will run are
    weighed one by one (their sources' rows against those the same parts of the query
    read when recomputed), then ``decide`` raises RecomputeCheaper when the delta's
    reads reach the threshold of the recompute's."""

    def __init__(
        self,
        spark: Any,
        recompute_if: Callable[[ReadEstimate], bool],
        stats: dict[str, object],
        cached_reads: int,
        table_rows: int,
    ) -> None:
        self.spark, self.recompute_if, self.stats = spark, recompute_if, stats
        # a cached change is a leaf the plans cannot count: its capture's reads
        self.estimate: ReadEstimate | None = ReadEstimate(cached_reads, 0, table_rows)

    def weigh(self, delta: str, full: str | None) -> None:
        """``full``: None when the statement ``delta`` reads has no counterpart in a
        recompute (a recompute of an aggregate's touched groups)."""
        if self.estimate is None:
            return
        try:
            d = planned_rows(self.spark, delta)
            f = planned_rows(self.spark, full) if full is not None else 0
        except Exception:  # a plan shape or Spark version it cannot read: no estimate
            d = f = None
        e = self.estimate
        self.estimate = (
            None
            if d is None or f is None
            else ReadEstimate(e.delta_rows + d, e.full_rows + f, e.full_write_rows)
        )

    def decide(self) -> None:
        e = self.estimate
        if e is None:
            return
        self.stats["estimate.delta_read_rows"] = e.delta_rows
        self.stats["estimate.full_read_rows"] = e.full_rows
        self.stats["estimate.full_write_rows"] = e.full_write_rows
        if self.recompute_if(e):
            raise RecomputeCheaper(e)
