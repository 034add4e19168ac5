"""Deduplication of a change log: the latest event of every order, kept by
``ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY event_ts DESC) = 1``, refreshed three
ways side by side on the same data and the same change batches:

- ``full``: ``INSERT OVERWRITE latest <query>``, the scheduled job users run today;
- ``inc``: dyntables, ``REFRESH_MODE = INCREMENTAL`` (the window's delta rule always);
- ``auto``: dyntables, ``REFRESH_MODE = AUTO`` (recomputes when the delta would read as
  much as a recompute).

The log is loaded the way a log grows, in batches of increasing order ids, so each data
file holds a range of ids. A batch is ``new`` (events of new orders), ``recent`` (new
events of the most recent orders: their status moves on) or ``scattered`` (new events of
orders all over the id range). After each round the three tables are checked to agree.

    .venv/bin/python -m bench.dedup                        # 1M events, 10k per batch
    .venv/bin/python -m bench.dedup --events 1M,10M --change 10000 --rounds 3

Results go to ``bench/results/dedup-<time>.json`` (the run's arguments, machine and
measurements), a table of medians to stdout.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass

from bench.pipeline import Meter, refresh_side_by_side, run_sizes
from dyntables import Lakehouse

LOAD_BATCHES = 20
KINDS = ("new", "recent", "scattered")
LATEST = (
    "SELECT order_id, status, amount, event_ts FROM (SELECT *, ROW_NUMBER() OVER "
    "(PARTITION BY order_id ORDER BY event_ts DESC) AS rn FROM events) WHERE rn = 1"
)
STATUSES = "array('created', 'paid', 'shipped', 'delivered')"


@dataclass(frozen=True)
class Measurement:
    events: int
    change: int
    kind: str
    round: int
    method: str
    seconds: float
    input_rows: int
    mode: str


class Log:
    """The events table: two events per order, loaded in batches of increasing ids."""

    def __init__(self, lh: Lakehouse, events: int) -> None:
        self.lh, self.spark = lh, lh.spark
        self.orders = events // 2
        self.next_ts = events

    def load(self) -> None:
        self.spark.sql(
            "CREATE TABLE events (order_id BIGINT, status STRING, amount DECIMAL(10,2), "
            "event_ts BIGINT)"
        )
        step = max(self.orders * 2 // LOAD_BATCHES, 1)
        for first in range(0, self.orders * 2, step):
            last = min(first + step, self.orders * 2)
            self.spark.sql(f"INSERT INTO events {self._events('id DIV 2', first, last)}")

    def _events(self, order_id: str, first: int, last: int) -> str:
        return (
            f"SELECT {order_id} AS order_id, element_at({STATUSES}, CAST(id % 4 + 1 AS INT)) AS status, "
            f"CAST(1 + (id * 31) % 50000 / 100.0 AS DECIMAL(10,2)) AS amount, {self.next_ts} + id AS event_ts "
            f"FROM range({first}, {last})"
        )

    def apply(self, kind: str, change: int) -> None:
        if kind == "new":
            order_id = f"{self.orders} + id"
            self.orders += change
        elif kind == "recent":
            order_id = f"{self.orders - 2 * change} + id * 2"
        else:
            order_id = f"id * {max(self.orders // change, 1)}"
        self.spark.sql(f"INSERT INTO events {self._events(order_id, 0, change)}")
        self.next_ts += change


def run(events: int, change: int, rounds: int, kinds: list[str]) -> list[Measurement]:
    out: list[Measurement] = []
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "4"}) as lh,
    ):
        log = Log(lh, events)
        log.load()
        lh.sql(
            f"""
            CREATE TABLE full_latest AS {LATEST};
            CREATE DYNAMIC TABLE inc_latest REFRESH_MODE = INCREMENTAL AS {LATEST};
            CREATE DYNAMIC TABLE auto_latest REFRESH_MODE = AUTO AS {LATEST}
            """
        )
        meter = Meter(lh.spark)
        for kind in kinds:
            for r in range(rounds):
                log.apply(kind, change)
                label = f"{events:>11,} {kind:>9} round {r}"
                for method, seconds, rows, mode in refresh_side_by_side(
                    lh, meter, "latest", LATEST, ("full", "inc", "auto"), label
                ):
                    out.append(Measurement(events, change, kind, r, method, seconds, rows, mode))
    return out


def summary(results: list[Measurement]) -> list[str]:
    lines = [
        "| events | batch | full s | inc s | auto s | full / inc | full / auto | inc rows read | auto mode |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(m.events, m.kind) for m in results}, key=lambda k: (k[0], KINDS.index(k[1])))
    for events, kind in keys:
        cell = [m for m in results if (m.events, m.kind) == (events, kind)]

        def median(method: str, field: str = "seconds", cell: list[Measurement] = cell) -> float:
            return statistics.median(getattr(m, field) for m in cell if m.method == method)

        full, inc, auto = median("full"), median("inc"), median("auto")
        modes = sorted({m.mode for m in cell if m.method == "auto"})
        lines.append(
            f"| {events:,} | {kind} | {full:.2f} | {inc:.2f} | {auto:.2f} | {full / inc:.1f}x "
            f"| {full / auto:.1f}x | {int(median('inc', 'input_rows')):,} | {'/'.join(modes)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", default="1M", help="comma-separated sizes, e.g. 1M,10M")
    parser.add_argument("--change", type=int, default=10_000, help="events per batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    return run_sizes(
        "dedup",
        argv,
        args,
        args.events,
        lambda events: run(events, args.change, args.rounds, kinds),
        summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
