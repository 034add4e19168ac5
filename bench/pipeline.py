"""The seeds' three-layer e-commerce pipeline (orders JOIN products -> per-category GMV ->
rank), refreshed four ways side by side on the same data and the same change batches:

- ``full``: the scheduled job users run today, ``INSERT OVERWRITE <layer> <query>``;
- ``hand``: a hand-written incremental job (append new orders by watermark, MERGE the
  per-category deltas, rewrite the small rank); it cannot see updates or deletes, so it
  runs on insert-only batches only;
- ``inc``: dyntables, ``REFRESH_MODE = INCREMENTAL``;
- ``auto``: dyntables, ``REFRESH_MODE = AUTO`` (may choose FULL for a large change).

Each round applies one change batch to ``orders`` (inserts only, or a mix of 70% inserts,
20% updates and 10% deletes of recent orders), timed itself (the cost a refresh of it
is weighed against), then every method refreshes its three layers, timed per layer, with
the rows Spark read (input metrics of the layer's jobs).
After each round the four sets of tables are checked to agree.

    .venv/bin/python -m bench.pipeline                         # quick: 1M orders, 0.1% and 1%
    .venv/bin/python -m bench.pipeline --orders 1M,10M --changes 0.01,0.1,1,10 --rounds 3

Results go to ``bench/results/pipeline-<time>.json`` (a list of measurements); use
``python -m bench.report`` to turn them into tables and plots.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dyntables import Lakehouse
from dyntables.engine.metrics import stages_input_rows

PRODUCTS = 10_000
CATEGORIES = 50
DAYS = 100
LAYERS = ("dwd", "dws", "ads")

DWD = (
    "SELECT o.order_id, o.order_ts, o.qty, o.price, o.qty * o.price AS amount, p.category "
    "FROM orders o JOIN products p ON o.product_id = p.product_id WHERE o.status <> 'cancelled'"
)
# every method's dwd is partitioned like orders, by day, as one lays out a fact table of
# this size: corrections of recent orders then land in recent partitions only
DWD_LAYOUT = "PARTITIONED BY (days(order_ts))"
DWS = "SELECT category, COUNT(*) AS orders, SUM(amount) AS gmv, AVG(price) AS avg_price FROM {dwd} GROUP BY category"
ADS = "SELECT category, gmv, RANK() OVER (ORDER BY gmv DESC) AS rk FROM {dws}"


# the row a round's batch is recorded as: its seconds are the batch's own statements
SOURCE, BATCH = "source", "batch"


@dataclass(frozen=True)
class Measurement:
    orders: int
    change_pct: float
    kind: str  # insert | mixed
    round: int
    method: str  # full | hand | inc | auto, or SOURCE for the batch itself
    layer: str  # dwd | dws | ads, or BATCH
    seconds: float
    input_rows: int
    mode: str  # for dyntables: the refresh mode it ran


def parse_count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


# -- measuring ----------------------------------------------------------------------------


class Meter:
    """Wall time and Spark input rows (stage input metrics) of the jobs run inside
    ``measure``; a dyntables refresh sets its own job group, so jobs are told apart by id."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext._jsc.sc()
        self.store = self.sc.statusStore()

    def _job_ids(self) -> list[int]:
        return [int(j.jobId()) for j in _seq(self.store.jobsList(None))]

    @contextmanager
    def measure(self) -> Iterator[dict[str, float]]:
        before = set(self._job_ids())
        out: dict[str, float] = {}
        t0 = time.perf_counter()
        try:
            yield out
        finally:
            out["seconds"] = time.perf_counter() - t0
            # the store is fed by the listener bus, asynchronously: without waiting, the
            # last stages' input metrics were sometimes missing
            self.sc.listenerBus().waitUntilEmpty(10_000)
            stages: set[int] = set()
            for job in _seq(self.store.jobsList(None)):
                if int(job.jobId()) not in before:
                    stages.update(int(s) for s in _seq(job.stageIds()))
            out["input_rows"] = stages_input_rows(self.store, stages)


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


# -- the workload -------------------------------------------------------------------------


class Workload:
    def __init__(
        self, lh: Lakehouse, orders: int, seed: int = 7, writes: str = "copy-on-write"
    ) -> None:
        self.lh = lh
        # how UPDATE and DELETE change orders: rewrite the files they touch (Iceberg's
        # default), or add delete files beside them (merge-on-read, as streaming writers do)
        self.writes = writes
        self.spark = lh.spark
        self.orders = orders
        self.next_id = orders
        self.seed = seed
        self.batch = 0

    def load(self) -> None:
        self.lh.sql(
            f"""
            CREATE TABLE products (product_id BIGINT, category STRING, name STRING);
            INSERT INTO products SELECT id, concat('cat-', lpad(CAST(id % {CATEGORIES} AS STRING), 2, '0')),
              concat('product-', id) FROM range({PRODUCTS});
            CREATE TABLE orders (order_id BIGINT, product_id BIGINT, customer_id BIGINT, qty INT,
              price DECIMAL(10,2), status STRING, order_ts TIMESTAMP) PARTITIONED BY (days(order_ts))
              TBLPROPERTIES ('write.delete.mode'='{self.writes}', 'write.update.mode'='{self.writes}',
                'write.merge.mode'='{self.writes}');
            """
        )
        self.spark.sql(f"INSERT INTO orders {self._orders_sql(0, self.orders)}")

    def _orders_sql(self, first: int, count: int, day: int | None = None) -> str:
        """Orders ``first .. first+count``; spread over DAYS days, or all on ``day``."""
        when = (
            f"timestamp_seconds(1767225600 + {day} * 86400 + id % 86400)"
            if day is not None
            else f"timestamp_seconds(1767225600 + CAST(id * {DAYS} / {max(self.orders, 1)} AS BIGINT) * 86400 + id % 86400)"
        )
        return (
            f"SELECT id AS order_id, (id * 7919) % {PRODUCTS} AS product_id, (id * 104729) % 100000 AS customer_id, "
            f"CAST(1 + id % 5 AS INT) AS qty, CAST(1 + (id * 31) % 50000 / 100.0 AS DECIMAL(10,2)) AS price, "
            f"CASE WHEN id % 20 = 0 THEN 'cancelled' ELSE 'done' END AS status, {when} AS order_ts "
            f"FROM range({first}, {first + count})"
        )

    def apply(self, change: int, kind: str) -> None:
        """One batch on ``orders``: new orders today; for ``mixed`` also corrections and
        cancellations (deletes) of recent orders, the ones a late update really touches."""
        self.batch += 1
        inserts = change if kind == "insert" else change * 7 // 10
        self.spark.sql(f"INSERT INTO orders {self._orders_sql(self.next_id, inserts, day=DAYS)}")
        self.next_id += inserts
        if kind == "mixed":
            updates, deletes = change * 2 // 10, change - inserts - change * 2 // 10
            recent = max(self.orders // DAYS, updates + deletes) * 2  # the last ~2 days
            lo = self.next_id - recent
            stride = max(recent // max(updates + deletes, 1), 1)
            self.spark.sql(
                f"UPDATE orders SET qty = qty + 1, status = CASE WHEN status = 'done' THEN 'done' ELSE 'done' END "
                f"WHERE order_id >= {lo} AND (order_id - {lo}) % {stride} = 0 AND order_id < {lo + updates * stride}"
            )
            lo2 = lo + updates * stride
            self.spark.sql(
                f"DELETE FROM orders WHERE order_id >= {lo2} AND (order_id - {lo2}) % {stride} = 1 "
                f"AND order_id < {lo2 + deletes * stride}"
            )


# -- the methods --------------------------------------------------------------------------


class Full:
    name = "full"

    def __init__(self, lh: Lakehouse) -> None:
        self.lh = lh

    def create(self) -> None:
        self.lh.sql(
            f"""
            CREATE TABLE full_dwd {DWD_LAYOUT} AS {DWD};
            CREATE TABLE full_dws AS {DWS.format(dwd="full_dwd")};
            CREATE TABLE full_ads AS {ADS.format(dws="full_dws")}
            """
        )

    def refresh(self, layer: str) -> str:
        query = {"dwd": DWD, "dws": DWS.format(dwd="full_dwd"), "ads": ADS.format(dws="full_dws")}[
            layer
        ]
        self.lh.spark.sql(f"INSERT OVERWRITE full_{layer} {query}")
        return "FULL"


class Hand:
    """What a careful engineer writes by hand: a watermark on order_id for new orders,
    MERGE of per-category sums (AVG kept as sum and count), and a rewrite of the rank."""

    name = "hand"

    def __init__(self, lh: Lakehouse) -> None:
        self.lh = lh
        self.spark = lh.spark
        self.watermark = -1

    def create(self) -> None:
        self.lh.sql(
            f"""
            CREATE TABLE hand_dwd {DWD_LAYOUT} AS {DWD};
            CREATE TABLE hand_dws AS SELECT category, COUNT(*) AS orders, SUM(amount) AS gmv,
              AVG(price) AS avg_price, SUM(price) AS sum_price FROM hand_dwd GROUP BY category;
            CREATE TABLE hand_ads AS {ADS.format(dws="hand_dws")}
            """
        )
        self.watermark = int(self.spark.sql("SELECT max(order_id) FROM hand_dwd").first()[0])
        self.previous = self.watermark

    def refresh(self, layer: str) -> str:
        if layer == "dwd":
            self.previous = self.watermark
            self.spark.sql(f"INSERT INTO hand_dwd {DWD} AND o.order_id > {self.watermark}")
            self.watermark = int(self.spark.sql("SELECT max(order_id) FROM orders").first()[0])
        elif layer == "dws":
            self.spark.sql(
                f"""
                MERGE INTO hand_dws t USING (
                  SELECT category, COUNT(*) AS orders, SUM(amount) AS gmv, SUM(price) AS sum_price
                  FROM hand_dwd WHERE order_id > {self.previous} GROUP BY category) d
                ON t.category = d.category
                WHEN MATCHED THEN UPDATE SET orders = t.orders + d.orders, gmv = t.gmv + d.gmv,
                  sum_price = t.sum_price + d.sum_price,
                  avg_price = CAST((t.sum_price + d.sum_price) / (t.orders + d.orders) AS DECIMAL(14,6))
                WHEN NOT MATCHED THEN INSERT (category, orders, gmv, avg_price, sum_price)
                  VALUES (d.category, d.orders, d.gmv, CAST(d.sum_price / d.orders AS DECIMAL(14,6)), d.sum_price)
                """
            )
        else:
            self.spark.sql(f"INSERT OVERWRITE hand_ads {ADS.format(dws='hand_dws')}")
        return "HAND"


class Dynamic:
    def __init__(self, lh: Lakehouse, mode: str) -> None:
        self.lh = lh
        self.mode = mode
        self.name = "inc" if mode == "INCREMENTAL" else "auto"

    def create(self) -> None:
        p, m = self.name, self.mode
        self.lh.sql(
            f"""
            CREATE DYNAMIC TABLE {p}_dwd {DWD_LAYOUT} REFRESH_MODE = {m} AS {DWD};
            CREATE DYNAMIC TABLE {p}_dws REFRESH_MODE = {m} AS {DWS.format(dwd=f"{p}_dwd")};
            CREATE DYNAMIC TABLE {p}_ads REFRESH_MODE = {m} AS {ADS.format(dws=f"{p}_dws")}
            """
        )

    def refresh(self, layer: str) -> str:
        return str(self.lh.sql(f"REFRESH DYNAMIC TABLE {self.name}_{layer}").first().refresh_mode)


def rows_differing(spark: Any, reference: str, other: str, cols: str = "*") -> int:
    """How many rows two tables do not share, duplicates counted (EXCEPT ALL both ways, in
    one Spark job; only the count comes back to the driver)."""
    return int(
        spark.sql(
            f"SELECT count(*) FROM ((SELECT {cols} FROM {reference} EXCEPT ALL SELECT {cols} FROM {other}) "
            f"UNION ALL (SELECT {cols} FROM {other} EXCEPT ALL SELECT {cols} FROM {reference}))"
        ).first()[0]
    )


def refresh_side_by_side(
    lh: Lakehouse, meter: Meter, table: str, query: str, methods: Sequence[str], label: str
) -> list[tuple[str, float, int, str]]:
    """One change refreshed by every method, measured and printed: ``full`` recomputes
    ``full_<table>`` with ``INSERT OVERWRITE``, any other method refreshes the dynamic
    table ``<method>_<table>``; then each must hold ``full_<table>``'s rows. Returns
    (method, seconds, rows read, refresh mode) per method."""
    out = []
    for method in methods:
        with meter.measure() as m:
            if method == "full":
                lh.spark.sql(f"INSERT OVERWRITE full_{table} {query}")
                mode = "FULL"
            else:
                row = lh.sql(f"REFRESH DYNAMIC TABLE {method}_{table}").first()
                mode = str(row.refresh_mode) if row is not None else "?"
        seconds, rows = m["seconds"], int(m["input_rows"])
        print(f"{label} {method:>4}: {seconds:6.2f} s, {rows:>11,} rows read, {mode}", flush=True)
        out.append((method, seconds, rows, mode))
    for method in methods:
        differ = (
            0
            if method == "full"
            else rows_differing(lh.spark, f"full_{table}", f"{method}_{table}")
        )
        if differ:
            raise AssertionError(
                f"{method}_{table} differs from the recomputed table in {differ} rows"
            )
    return out


def _check_agree(lh: Lakehouse, methods: list[Any], insert_only: bool) -> None:
    """The methods' tables hold the same rows (hand-written: only after insert-only batches)."""
    reference = "full"
    for m in methods:
        if m.name == reference or (m.name == "hand" and not insert_only):
            continue
        for layer in LAYERS:
            cols = {"dwd": "*", "dws": "category, orders, gmv, avg_price", "ads": "*"}[layer]
            diff = rows_differing(lh.spark, f"{reference}_{layer}", f"{m.name}_{layer}", cols)
            if diff:
                raise AssertionError(
                    f"{m.name}_{layer} differs from {reference}_{layer} in {diff} rows"
                )


def run(
    args: argparse.Namespace, save: Callable[[list[Measurement]], object] = lambda _: None
) -> list[Measurement]:
    """Every (size, kind, change, round); ``save`` gets the measurements so far after each
    round, so a long run stopped half-way keeps what it measured."""
    results: list[Measurement] = []
    sizes = [parse_count(s) for s in args.orders.split(",")]
    changes = [float(c) for c in args.changes.split(",")]
    kinds = args.kinds.split(",")
    for size in sizes:
        for kind in kinds:
            _run_size(args, size, kind, changes, results, save)
    return results


@contextmanager
def bench_lakehouse(args: argparse.Namespace) -> Iterator[Lakehouse]:
    """A Lakehouse over a throwaway warehouse (under ``--tmp``) with the benchmarks'
    settings: ``--shuffle-partitions`` and a driver large enough for 10M-row loads."""
    with (
        tempfile.TemporaryDirectory(dir=args.tmp) as warehouse,
        Lakehouse(
            warehouse=warehouse,
            conf={
                "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
                "spark.driver.memory": "6g",
            },
        ) as lh,
    ):
        yield lh


def _run_size(
    args: argparse.Namespace,
    size: int,
    kind: str,
    changes: list[float],
    out: list[Measurement],
    save: Callable[[list[Measurement]], object],
) -> None:
    with bench_lakehouse(args) as lh:
        print(f"# {size:,} orders, {kind} batches: loading", flush=True)
        t0 = time.perf_counter()
        work = Workload(lh, size, writes=args.orders_writes)
        work.load()
        methods: list[Any] = [Full(lh)]
        if kind == "insert" and "hand" in args.methods:
            methods.append(Hand(lh))
        if "inc" in args.methods:
            methods.append(Dynamic(lh, "INCREMENTAL"))
        if "auto" in args.methods:
            methods.append(Dynamic(lh, "AUTO"))
        for m in methods:
            m.create()
        print(f"  loaded and built in {time.perf_counter() - t0:.0f}s", flush=True)
        meter = Meter(lh.spark)
        for pct in changes:
            change = max(int(size * pct / 100), 1)
            for r in range(args.rounds):
                t_batch = time.perf_counter()
                work.apply(change, kind)
                # the batch's own statements on orders, the cost a refresh is weighed
                # against: copy-on-write updates and deletes rewrite whole files, and so
                # must a dynamic table that reflects them
                out.append(
                    Measurement(
                        size, pct, kind, r, SOURCE, BATCH, time.perf_counter() - t_batch, 0, kind
                    )
                )
                line = [f"batch={out[-1].seconds:.2f}s"]
                # each round starts with another method: whoever refreshes right after
                # another one finds its files and plans warm (an order effect)
                turn = r % len(methods)
                for m in methods[turn:] + methods[:turn]:
                    for layer in LAYERS:
                        with meter.measure() as got:
                            mode = m.refresh(layer)
                        out.append(
                            Measurement(
                                size,
                                pct,
                                kind,
                                r,
                                m.name,
                                layer,
                                got["seconds"],
                                int(got["input_rows"]),
                                mode,
                            )
                        )
                        line.append(
                            f"{m.name}.{layer}={got['seconds']:.2f}s/{int(got['input_rows']):,}r"
                        )
                print(f"  {pct}% ({change:,} rows) round {r}: " + " ".join(line), flush=True)
                if args.check:
                    _check_agree(lh, methods, kind == "insert")
                save(out)


def summarize(results: list[Measurement]) -> str:
    """Median seconds per (orders, kind, change, layer) and method, with ratios to full."""
    keys = sorted(
        {(m.orders, m.kind, m.change_pct, m.layer) for m in results if m.layer in LAYERS},
        key=lambda k: (k[0], k[1], k[2], LAYERS.index(k[3])),
    )
    methods = [n for n in ("full", "hand", "inc", "auto") if any(m.method == n for m in results)]
    lines = [
        "| orders | batch | change | layer | "
        + " | ".join(f"{n} s" for n in methods)
        + " | full / inc | inc rows read | inc modes |",
        "|---|---|---|---|" + "---|" * len(methods) + "---|---|---|",
    ]
    for orders, kind, pct, layer in keys:
        cell: dict[str, float] = {}
        rows: dict[str, int] = {}
        modes: dict[str, str] = {}
        for n in methods:
            ms = [
                m
                for m in results
                if (m.orders, m.kind, m.change_pct, m.layer, m.method)
                == (orders, kind, pct, layer, n)
            ]
            if ms:
                cell[n] = statistics.median(m.seconds for m in ms)
                rows[n] = int(statistics.median(m.input_rows for m in ms))
                modes[n] = "/".join(sorted({m.mode for m in ms}))
        values = " | ".join(f"{cell[n]:.2f}" if n in cell else "n/a" for n in methods)
        ratio = f"{cell['full'] / cell['inc']:.1f}x" if "full" in cell and "inc" in cell else ""
        lines.append(
            f"| {orders:,} | {kind} | {pct}% | {layer} | {values} | {ratio} | {rows.get('inc', 0):,} | {modes.get('inc', '')} |"
        )
    batches = sorted({(m.orders, m.kind, m.change_pct) for m in results if m.layer == BATCH})
    lines += [""] if batches else []
    for orders, kind, pct in batches:
        took = [
            m.seconds
            for m in results
            if (m.orders, m.kind, m.change_pct, m.layer) == (orders, kind, pct, BATCH)
        ]
        lines.append(
            f"- the batch itself ({orders:,} orders, {kind}, {pct}%): "
            f"{statistics.median(took):.2f} s median on orders"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--orders", default="1M", help="comma-separated sizes, e.g. 1M,10M,100M")
    parser.add_argument("--changes", default="0.1,1", help="change sizes in percent of the orders")
    parser.add_argument("--kinds", default="insert,mixed", help="insert and/or mixed batches")
    parser.add_argument("--methods", default="full,hand,inc,auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--orders-writes",
        choices=("copy-on-write", "merge-on-read"),
        default="copy-on-write",
        help="how the batches' UPDATE and DELETE write orders",
    )
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument(
        "--no-check", dest="check", action="store_false", help="skip the agreement check"
    )
    parser.add_argument("--tmp", default=None, help="where the temporary warehouse goes")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    results = run(
        args, lambda so_far: write_results(args.out, "pipeline", started, argv, {}, so_far)
    )
    path = write_results(args.out, "pipeline", started, argv, {}, results)
    print(summarize(results))
    print(f"results: {path}")
    return 0


def run_sizes(
    name: str,
    argv: list[str] | None,
    args: argparse.Namespace,
    sizes: str,
    run_size: Callable[[int], list[Any]],
    summary: Callable[[list[Any]], list[str]],
) -> int:
    """A bench's main after its arguments: ``run_size`` at each of the comma-separated
    ``sizes`` (1M, 100k...), then the results file and the summary table."""
    started = datetime.now(UTC)
    results: list[Any] = []
    for size in (parse_count(s) for s in sizes.split(",")):
        results += run_size(size)
    path = write_results(args.out, name, started, argv, {}, results)
    print("\n".join(summary(results)))
    print(f"results: {path}")
    return 0


def write_results(
    out: str,
    kind: str,
    started: datetime,
    argv: list[str] | None,
    meta: dict[str, Any],
    results: list[Any],
) -> Path:
    """``<out>/<kind>-<start time>.json``: the run's arguments, machine and measurements."""
    Path(out).mkdir(parents=True, exist_ok=True)
    path = Path(out) / f"{kind}-{started:%Y%m%dT%H%M%S}.json"
    meta = meta | {
        "argv": argv if argv is not None else sys.argv[1:],
        "started": started.isoformat(),
        "finished": datetime.now(UTC).isoformat(),
        "nproc": os.cpu_count(),
        "load": os.getloadavg(),
    }
    path.write_text(json.dumps({"meta": meta, "results": [asdict(m) for m in results]}, indent=1))
    return path


def load_results(path: str | Path, cls: Any = None) -> list[Any]:
    """The measurements of a results file, as ``cls`` (this module's Measurement)."""
    make = cls or Measurement
    return [make(**m) for m in json.loads(Path(path).read_text())["results"]]


if __name__ == "__main__":
    raise SystemExit(main())
