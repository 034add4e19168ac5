"""A long run of the seeds' pipeline under the in-process scheduler: does anything grow
that should not (refresh time, JVM heap, threads, cached data, process memory)?

    python -m bench.soak [--minutes 30] [--every 120] [--interval 1] [--warehouse DIR]

The real-time sales dashboard (examples/sales_dashboard: DWD join + filter, ADS
aggregate, ADS RANK leaderboard), every layer with a ``--interval`` REFRESH INTERVAL,
refreshed by the scheduler while a writer commits a batch of orders every second, as a
deployment runs for days. Every ``--every`` seconds one line: refreshes with data so far,
each layer's median refresh time in that window, the JVM's heap after a full GC, JVM and
Python threads, RDDs left cached, resident memory of both processes, and the warehouse's
size and file count. A leak shows as a column that climbs window after window; the
warehouse grows with the data and with the snapshots retention keeps (one day by
default), by design.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

from dyntables import Lakehouse
from dyntables.demo import DYNAMIC_TABLES, INITIAL_ORDERS, LAYERS, SOURCES, OrderWriter, read_script
from dyntables.scheduler import SchedulerEvent
from dyntables.scheduler import events as ev

NAMESPACE = "bench_soak"
COLUMNS = (
    "minute",
    "refreshes",
    *(f"{table} ms" for _, table in LAYERS),
    "heap MB",
    "JVM threads",
    "Python threads",
    "cached RDDs",
    "JVM RSS MB",
    "Python RSS MB",
    "warehouse MB",
    "files",
)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def disk(path: str) -> tuple[float, int]:
    size, count = 0, 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                size += os.path.getsize(os.path.join(root, name))
                count += 1
            except OSError:  # expired and deleted while walking
                pass
    return size / 2**20, count


def sample(
    lh: Lakehouse, warehouse: str, events: list[SchedulerEvent], since: int, started: float
) -> list[str]:
    """One line of COLUMNS; ``since``: index of the first event of this window."""
    jvm: Any = lh.spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    jvm.java.lang.System.gc()
    heap = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
    window = [e for e in events[since:] if e.kind == ev.REFRESHED and e.mode != "NO_DATA"]
    done = sum(1 for e in events if e.kind == ev.REFRESHED and e.mode != "NO_DATA")
    medians = []
    for _, table in LAYERS:
        took = [e.duration_s or 0.0 for e in window if e.name.endswith("." + table)]
        medians.append(f"{statistics.median(took) * 1000:.0f}" if took else "-")
    size, files = disk(warehouse)
    return [
        f"{(time.time() - started) / 60:.1f}",
        str(done),
        *medians,
        f"{heap:.0f}",
        str(jvm.java.lang.Thread.activeCount()),
        str(threading.active_count()),
        str(lh.spark.sparkContext._jsc.getPersistentRDDs().size()),
        f"{rss_mb(int(jvm.java.lang.ProcessHandle.current().pid())):.0f}",
        f"{rss_mb(os.getpid()):.0f}",
        f"{size:.0f}",
        str(files),
    ]


def run(lh: Lakehouse, warehouse: str, args: argparse.Namespace, command: str) -> int:
    lh.sql(read_script(SOURCES))
    lh.sql(read_script(INITIAL_ORDERS))
    lh.sql(read_script(DYNAMIC_TABLES, args.interval))
    events: list[SchedulerEvent] = []
    lh.start_scheduler(workers=2, tick=1.0, namespaces=[NAMESPACE], listeners=[events.append])
    writer = OrderWriter(lh, 1.0, lambda at, completed: None, seed=11)
    started = time.time()
    writer.start()
    print(f"`{command}`\n\n| {' | '.join(COLUMNS)} |\n|{'---|' * len(COLUMNS)}", flush=True)
    since = 0
    try:
        while time.time() - started < args.minutes * 60 and writer.error is None:
            time.sleep(min(args.every, max(args.minutes * 60 - (time.time() - started), 0)))
            count = len(events)
            print(f"| {' | '.join(sample(lh, warehouse, events, since, started))} |", flush=True)
            since = count
    finally:
        writer.stop()
        writer.join()
        lh.stop_scheduler()
    failed = [e for e in events if e.kind in (ev.FAILED, ev.ERROR, ev.SUSPENDED)]
    if writer.error:
        print(f"writer failed: {writer.error}", file=sys.stderr)
    if failed:
        print(
            f"{len(failed)} refreshes failed, first: {failed[0].name} {failed[0].message}",
            file=sys.stderr,
        )
    return 1 if writer.error or failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="how long (default 30)")
    parser.add_argument("--every", type=float, default=120.0, help="seconds between lines")
    parser.add_argument("--interval", type=int, default=1, help="refresh interval, seconds")
    parser.add_argument("--warehouse", help="default: a fresh temporary folder")
    args = parser.parse_args(argv)
    command = "python -m bench.soak " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    scratch = None if args.warehouse else tempfile.TemporaryDirectory(prefix="dyntables-soak-")
    warehouse = scratch.name if scratch else args.warehouse
    lh = Lakehouse(warehouse=warehouse, namespace=NAMESPACE)
    try:
        return run(lh, warehouse, args, command)
    finally:
        lh.close()
        if scratch is not None:  # a warehouse of our own is not left in the temp folder
            scratch.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
