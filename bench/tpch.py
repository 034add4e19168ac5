"""A TPC-H-style workload: Q1, Q3, Q5, Q10 and Q18 kept up to date under TPC-H's refresh
functions, three ways side by side on the same data and the same refresh sets:

- ``full``: ``INSERT OVERWRITE <table> <query>`` (what a scheduled job does today);
- ``inc``: dyntables, ``REFRESH_MODE = INCREMENTAL``;
- ``auto``: dyntables, ``REFRESH_MODE = AUTO``.

Data comes from ``tpchgen-cli`` (Parquet, cached under ``bench/data/tpch/sf<SF>/``) and is
loaded into Iceberg tables by Spark. Each round applies RF1 (new ORDERS with their
LINEITEMs, ``--change`` percent of the orders), refreshes every query by every method
(timed one by one), then RF2 (deletes as many existing ORDERS and their LINEITEMs) and
refreshes again. After every refresh the methods' tables are checked to hold the same rows.

    .venv/bin/python -m bench.tpch --sf 0.1 --rounds 3
    .venv/bin/python -m bench.tpch --sf 0.01 --rounds 1 --queries q1,q18   # quick check

The queries are in ``bench/tpch_queries/`` (substitution parameters fixed to the
validation values, ORDER BY / LIMIT dropped: a table has no order). Results go to
``bench/results/tpch-<time>.json``; a table of medians is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.pipeline import Meter, bench_lakehouse, rows_differing, write_results
from bench.pipeline import load_results as pipeline_results
from dyntables import Lakehouse

QUERIES = ("q1", "q3", "q5", "q10", "q18")
# The tables the five queries read (PART and PARTSUPP are not needed).
TABLES = ("region", "nation", "supplier", "customer", "orders", "lineitem")
QUERY_DIR = Path(__file__).with_name("tpch_queries")
CACHE = Path(__file__).with_name("data") / "tpch"
METHODS = ("full", "inc", "auto")


@dataclass(frozen=True)
class Measurement:
    sf: float
    change_pct: float
    rf: str  # RF1 (insert) | RF2 (delete)
    round: int
    query: str
    method: str  # full | inc | auto
    seconds: float
    input_rows: int  # input records of the Spark stages the refresh ran
    mode: str  # FULL for ``full``; for dyntables the mode the refresh ran
    job_id: str = ""
    rows_read: int = -1  # dyntables: the history's sum of rows_read.<source>
    full_reason: str = ""  # dyntables: why a refresh ran FULL
    stats: dict[str, str] = field(default_factory=dict)  # dyntables: the history's stats


def query_sql(name: str) -> str:
    """The query text without its header comment (the comment says what was adapted)."""
    lines = (QUERY_DIR / f"{name}.sql").read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()


# -- data -----------------------------------------------------------------------------------


def generate(sf: float, cache: Path = CACHE) -> Path:
    """Parquet files of the tables at scale factor ``sf``, generated once per scale factor:
    tpchgen-cli is deterministic, so a cached folder is the same data."""
    folder = cache / f"sf{sf:g}"
    if (folder / ".complete").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"sf{sf:g}-", dir=cache))
    tables = [arg for t in TABLES for arg in ("-T", t)]
    subprocess.run(
        [_tpchgen(), "parquet", "-s", f"{sf:g}", *tables, "-o", str(partial), "-q"], check=True
    )
    (partial / ".complete").write_text(f"tpchgen-cli parquet -s {sf:g}\n")
    partial.rename(folder)
    return folder


def _tpchgen() -> str:
    """The tpchgen-cli next to this interpreter (the .venv), else the one on the PATH."""
    local = Path(sys.executable).with_name("tpchgen-cli")
    found = str(local) if local.exists() else shutil.which("tpchgen-cli")
    if not found:
        raise SystemExit("tpchgen-cli not found: pip install -r requirements-bench.lock")
    return found


def load(lh: Lakehouse, folder: Path) -> None:
    """One Iceberg table per TPC-H table, written by Spark straight from the Parquet."""
    for table in TABLES:
        lh.sql(f"CREATE TABLE {table} AS SELECT * FROM parquet.`{folder / table}.parquet`")


class RefreshSets:
    """TPC-H's refresh functions on ORDERS and LINEITEM, deterministic.

    TPC-H order keys are sparse: the i-th order (1-based) has key ``(i >> 3) << 5 | i & 7``,
    the low 8 slots of every block of 32, and dbgen's refresh sets put new orders in the
    unused slots (``+ 8 * seq``). RF1 of generation ``g`` copies the ``n`` newest original
    orders not copied yet, with their lineitems, into slot ``8 * seq`` of their block
    (past the largest key once the three free slots are used). RF2 deletes the ``n``
    oldest original orders not deleted yet, with their lineitems, as dbgen's delete sets
    do. Sets never overlap while ``2 * n * generations`` stays under the order count.
    """

    def __init__(self, lh: Lakehouse, orders: int, change: int) -> None:
        self.spark = lh.spark
        self.orders = orders
        self.change = change
        self.span = ((_key(orders) >> 5) + 1) << 5  # a block boundary past every key
        self.columns = {t: self.spark.table(t).columns for t in ("orders", "lineitem")}

    def rf1(self, generation: int) -> None:
        hi = self.orders - (generation - 1) * self.change
        lo, shift = hi - self.change + 1, self._shift(generation)
        self._check(generation)
        for table, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
            cols = ", ".join(
                f"{c} + {shift} AS {c}" if c == key else c for c in self.columns[table]
            )
            self.spark.sql(
                f"INSERT INTO {table} SELECT {cols} FROM {table} "
                f"WHERE {key} BETWEEN {_key(lo)} AND {_key(hi)} AND {key} % 32 < 8"
            )

    def rf2(self, generation: int) -> None:
        lo = (generation - 1) * self.change + 1
        hi = lo + self.change - 1
        self._check(generation)
        for table, key in (("lineitem", "l_orderkey"), ("orders", "o_orderkey")):
            self.spark.sql(
                f"DELETE FROM {table} WHERE {key} BETWEEN {_key(lo)} AND {_key(hi)} AND {key} % 32 < 8"
            )

    def _shift(self, generation: int) -> int:
        return 8 * ((generation - 1) % 3 + 1) + (generation - 1) // 3 * self.span

    def _check(self, generation: int) -> None:
        if 2 * self.change * generation > self.orders:
            raise SystemExit(f"{generation} refresh sets of {self.change} orders overlap")


def _key(i: int) -> int:
    return (i >> 3) << 5 | (i & 7)


# -- methods --------------------------------------------------------------------------------


class Full:
    """The plain Iceberg table a scheduled job rewrites with the whole query."""

    name = "full"

    def __init__(self, lh: Lakehouse) -> None:
        self.lh = lh

    def table(self, query: str) -> str:
        return f"full_{query}"

    def create(self, query: str) -> None:
        self.lh.sql(f"CREATE TABLE {self.table(query)} AS {query_sql(query)}")

    def refresh(self, query: str) -> tuple[str, str]:
        self.lh.spark.sql(f"INSERT OVERWRITE {self.table(query)} {query_sql(query)}")
        return "FULL", ""


class Dynamic:
    """A dynamic table with the query as written, in the given refresh mode."""

    def __init__(self, lh: Lakehouse, mode: str) -> None:
        self.lh = lh
        self.mode = mode
        self.name = "inc" if mode == "INCREMENTAL" else "auto"

    def table(self, query: str) -> str:
        return f"{self.name}_{query}"

    def create(self, query: str) -> None:
        self.lh.sql(
            f"CREATE DYNAMIC TABLE {self.table(query)} REFRESH_MODE = {self.mode} AS {query_sql(query)}"
        )

    def refresh(self, query: str) -> tuple[str, str]:
        row = self.lh.sql(f"REFRESH DYNAMIC TABLE {self.table(query)}").first()
        return str(row.refresh_mode), str(row.job_id)


def check_agree(lh: Lakehouse, methods: list[Any], query: str, when: str) -> None:
    """Every method's table holds the same rows as ``full``'s (EXCEPT ALL both ways, in
    one Spark job; only the count comes back). Fails loudly: a wrong table is no result."""
    reference = methods[0].table(query)
    for m in methods[1:]:
        other = m.table(query)
        diff = rows_differing(lh.spark, reference, other)
        if diff:
            raise AssertionError(f"{when}: {other} differs from {reference} in {diff} rows")


# -- the run --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> tuple[list[Measurement], dict[str, Any]]:
    queries = args.queries.split(",")
    folder = generate(args.sf)
    with bench_lakehouse(args) as lh:
        t0 = time.perf_counter()
        load(lh, folder)
        orders = int(lh.spark.sql("SELECT count(*) FROM orders").first()[0])
        change = max(int(orders * args.change / 100), 1)
        print(
            f"# SF {args.sf:g}: {orders:,} orders loaded in {time.perf_counter() - t0:.0f}s; "
            f"refresh sets of {change:,} orders",
            flush=True,
        )
        methods = _methods(lh, args.methods.split(","))
        built = _create(methods, queries)
        sets = RefreshSets(lh, orders, change)
        results: list[Measurement] = []
        for r in range(args.rounds):
            for rf, apply in (("RF1", sets.rf1), ("RF2", sets.rf2)):
                apply(r + 1)
                results += _refresh_all(lh, methods, queries, args, rf, r)
        results = _with_history(lh, results)
        meta = {"orders": orders, "change_orders": change, "create_seconds": built}
    return results, meta


def _methods(lh: Lakehouse, names: list[str]) -> list[Any]:
    """``full`` first: it is the reference the others are checked against."""
    out: list[Any] = [Full(lh)]
    out += [Dynamic(lh, "INCREMENTAL")] if "inc" in names else []
    out += [Dynamic(lh, "AUTO")] if "auto" in names else []
    return out


def _create(methods: list[Any], queries: list[str]) -> dict[str, float]:
    """Creates every table (a dynamic table's first refresh is a FULL build)."""
    built: dict[str, float] = {}
    for q in queries:
        for m in methods:
            t0 = time.perf_counter()
            m.create(q)
            built[m.table(q)] = time.perf_counter() - t0
    print("  built: " + " ".join(f"{t}={s:.1f}s" for t, s in built.items()), flush=True)
    return built


def _refresh_all(
    lh: Lakehouse, methods: list[Any], queries: list[str], args: argparse.Namespace, rf: str, r: int
) -> list[Measurement]:
    """Refreshes every query by every method, timed one by one. The methods take turns
    going first (rotated each round), so none always pays for a cold file cache."""
    meter = Meter(lh.spark)
    order = methods[r % len(methods) :] + methods[: r % len(methods)]
    out: list[Measurement] = []
    line = []
    for q in queries:
        for m in order:
            with meter.measure() as got:
                mode, job = m.refresh(q)
            out.append(
                Measurement(
                    args.sf,
                    args.change,
                    rf,
                    r,
                    q,
                    m.name,
                    got["seconds"],
                    int(got["input_rows"]),
                    mode,
                    job,
                )
            )
            line.append(
                f"{m.name}.{q}={got['seconds']:.2f}s{'' if m.name == 'full' else '/' + mode[0]}"
            )
        if args.check:
            check_agree(lh, methods, q, f"round {r} {rf} {q}")
    print(f"  round {r} {rf}: " + " ".join(line), flush=True)
    return out


def _with_history(lh: Lakehouse, results: list[Measurement]) -> list[Measurement]:
    """Adds each dyntables refresh's rows read and FULL reason from the refresh history,
    read once at the end so that no history read runs between timed refreshes."""
    jobs = {m.job_id for m in results if m.job_id}
    history = {
        row.job_id: row
        for row in lh.sql("SHOW DYNAMIC TABLE REFRESH HISTORY").collect()
        if row.job_id in jobs
    }
    out = []
    for m in results:
        row = history.get(m.job_id)
        stats = json.loads(row.stats or "{}") if row is not None else {}
        read = sum(int(v) for k, v in stats.items() if k.startswith("rows_read."))
        reason = stats.get("full_reason", "")
        out.append(replace(m, rows_read=read, full_reason=reason, stats=stats) if row else m)
    return out


# -- the report -----------------------------------------------------------------------------


def summarize(results: list[Measurement]) -> str:
    """Median seconds per query, refresh set and method, the full / inc and full / auto
    ratios, the rows each method read (Spark's input metrics: the change *and* the other
    sides a join delta reads), the rows inc captured from its sources (the history's
    rows_read), and the modes dyntables ran (with FULL reasons)."""
    methods = [n for n in METHODS if any(m.method == n for m in results)]
    keys = sorted({(m.query, m.rf) for m in results}, key=lambda k: (QUERIES.index(k[0]), k[1]))
    head = " | ".join(f"{n} s" for n in methods)
    lines = [
        f"| query | refresh set | {head} | full / inc | full / auto | full rows read "
        "| inc rows read | inc rows captured | inc mode | auto mode |",
        "|---|---|" + "---|" * len(methods) + "---|---|---|---|---|---|---|",
    ]
    for q, rf in keys:
        cell = {n: _pick(results, q, rf, n) for n in methods}
        med = {n: statistics.median(m.seconds for m in ms) for n, ms in cell.items() if ms}
        values = " | ".join(f"{med[n]:.2f}" if n in med else "n/a" for n in methods)
        inc = cell.get("inc", [])
        lines.append(
            f"| {q} | {rf} | {values} | {_ratio(med, 'inc')} | {_ratio(med, 'auto')} | "
            f"{_rows(cell['full'], 'input_rows')} | {_rows(inc, 'input_rows')} | "
            f"{_rows(inc, 'rows_read')} | {_modes(inc)} | {_modes(cell.get('auto', []))} |"
        )
    return "\n".join(lines)


def _rows(ms: list[Measurement], attr: str) -> str:
    return f"{int(statistics.median(getattr(m, attr) for m in ms)):,}" if ms else "n/a"


def _pick(results: Iterable[Measurement], query: str, rf: str, method: str) -> list[Measurement]:
    return [m for m in results if (m.query, m.rf, m.method) == (query, rf, method)]


def _ratio(med: dict[str, float], method: str) -> str:
    return f"{med['full'] / med[method]:.1f}x" if "full" in med and method in med else ""


def _modes(ms: list[Measurement]) -> str:
    """Distinct modes with their FULL reasons, e.g. ``INCREMENTAL`` or ``FULL (LIMIT)``."""
    seen = sorted({f"{m.mode} ({m.full_reason})" if m.full_reason else m.mode for m in ms})
    return "/".join(seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor")
    parser.add_argument(
        "--change", type=float, default=0.1, help="refresh set size, percent of ORDERS"
    )
    parser.add_argument("--rounds", type=int, default=3, help="RF1 + RF2 pairs")
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument(
        "--methods", default="full,inc,auto", help="full always runs (the reference)"
    )
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument(
        "--no-check", dest="check", action="store_false", help="skip the agreement check"
    )
    parser.add_argument("--tmp", default=None, help="where the temporary warehouse goes")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--report", metavar="JSON", help="print the table of a past run and exit")
    args = parser.parse_args(argv)
    if args.report:
        print(summarize(load_results(args.report)))
        return 0
    started = datetime.now(UTC)
    results, meta = run(args)
    path = write_results(args.out, "tpch", started, argv, meta, results)
    print(summarize(results))
    print(f"results: {path}")
    return 0


def load_results(path: str | Path) -> list[Measurement]:
    return pipeline_results(path, Measurement)


if __name__ == "__main__":
    raise SystemExit(main())
