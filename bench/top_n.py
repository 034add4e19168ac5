"""A top-N of groups: the 10 categories with the most sales, ``SELECT category,
SUM(amount) AS gmv, COUNT(*) AS orders FROM orders GROUP BY category ORDER BY gmv DESC,
category LIMIT 10``, refreshed three ways side by side on the same data and batches:

- ``full``: ``INSERT OVERWRITE top <query>``, the scheduled job users run today;
- ``inc``: dyntables, ``REFRESH_MODE = INCREMENTAL``;
- ``auto``: dyntables, ``REFRESH_MODE = AUTO`` (the default).

The query is maintained as a ranking of its groups: the change is summed into the
aggregate's state (a row per category), and the 1,000 categories are re-ranked from it,
so a refresh reads the change and the state, not the orders. A batch is ``insert`` (new
orders) or ``update`` (new amounts for orders spread over the table, rewriting the files
they are in). After each round the three tables are checked to agree.

    .venv/bin/python -m bench.top_n                              # 1M orders, 10k per batch
    .venv/bin/python -m bench.top_n --orders 1M,10M --change 10000 --rounds 3

Results go to ``bench/results/top_n-<time>.json``, a table of medians to stdout.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass

from bench.pipeline import Meter, refresh_side_by_side, run_sizes
from dyntables import Lakehouse

LOAD_BATCHES = 10
CATEGORIES = 1_000
KINDS = ("insert", "update")
TOP = (
    "SELECT category, SUM(amount) AS gmv, COUNT(*) AS orders FROM orders GROUP BY category "
    "ORDER BY gmv DESC, category LIMIT 10"
)


@dataclass(frozen=True)
class Measurement:
    orders: int
    change: int
    kind: str
    round: int
    method: str
    seconds: float
    input_rows: int
    mode: str


def _orders(first: str, count: int, salt: int) -> str:
    return (
        f"SELECT {first} + id AS order_id, CAST((id * 7919 + {salt}) % {CATEGORIES} AS INT) AS category, "
        f"CAST(1 + (id * 31 + {salt}) % 50000 / 100.0 AS DECIMAL(12,2)) AS amount FROM range(0, {count})"
    )


def run(orders: int, change: int, rounds: int, kinds: list[str]) -> list[Measurement]:
    out: list[Measurement] = []
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "4"}) as lh,
    ):
        spark = lh.spark
        spark.sql("CREATE TABLE orders (order_id BIGINT, category INT, amount DECIMAL(12,2))")
        step = max(orders // LOAD_BATCHES, 1)
        for first in range(0, orders, step):
            spark.sql(f"INSERT INTO orders {_orders(str(first), min(step, orders - first), 0)}")
        next_id = orders
        lh.sql(
            f"""
            CREATE TABLE full_top AS {TOP};
            CREATE DYNAMIC TABLE inc_top REFRESH_MODE = INCREMENTAL AS {TOP};
            CREATE DYNAMIC TABLE auto_top AS {TOP}
            """
        )
        meter = Meter(spark)
        for kind in kinds:
            for r in range(rounds):
                if kind == "insert":
                    spark.sql(f"INSERT INTO orders {_orders(str(next_id), change, r + 1)}")
                    next_id += change
                else:  # one order in every orders/change, all over the table
                    stride = max(next_id // change, 1)
                    spark.sql(
                        f"UPDATE orders SET amount = amount + {r + 1} "
                        f"WHERE order_id % {stride} = {r % stride}"
                    )
                label = f"{orders:>11,} {kind:>7} round {r}"
                for method, seconds, rows, mode in refresh_side_by_side(
                    lh, meter, "top", TOP, ("full", "inc", "auto"), label
                ):
                    out.append(Measurement(orders, change, kind, r, method, seconds, rows, mode))
    return out


def summary(results: list[Measurement]) -> list[str]:
    lines = [
        "| orders | batch | full s | inc s | auto s | full / inc | full / auto | full rows read | inc rows read | modes (inc, auto) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(m.orders, m.kind) for m in results}, key=lambda k: (k[0], KINDS.index(k[1])))
    for orders, kind in keys:
        cell = [m for m in results if (m.orders, m.kind) == (orders, kind)]

        def median(method: str, field: str = "seconds", cell: list[Measurement] = cell) -> float:
            return statistics.median(getattr(m, field) for m in cell if m.method == method)

        full, inc, auto = median("full"), median("inc"), median("auto")
        modes = [
            "/".join(sorted({m.mode for m in cell if m.method == method}))
            for method in ("inc", "auto")
        ]
        lines.append(
            f"| {orders:,} | {kind} | {full:.2f} | {inc:.2f} | {auto:.2f} | {full / inc:.1f}x "
            f"| {full / auto:.1f}x | {int(median('full', 'input_rows')):,} "
            f"| {int(median('inc', 'input_rows')):,} | {', '.join(modes)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", default="1M", help="comma-separated sizes, e.g. 1M,10M")
    parser.add_argument("--change", type=int, default=10_000, help="orders per batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    return run_sizes(
        "top_n",
        argv,
        args,
        args.orders,
        lambda orders: run(orders, args.change, args.rounds, kinds),
        summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
