"""Start-up cost of ``Lakehouse(...)``: cold (a new process: JVM start, Iceberg catalog,
namespace) and warm (a second Lakehouse in a process whose JVM is already up).

    .venv/bin/python -m bench.startup [--runs 5]

Each cold run is its own Python process; medians are printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from dyntables import Lakehouse
t_import = time.perf_counter() - t0
lh = Lakehouse(warehouse=sys.argv[1])
t_cold = time.perf_counter() - t0
lh.close()
t1 = time.perf_counter()
lh = Lakehouse(warehouse=sys.argv[1])
t_warm = time.perf_counter() - t1
t2 = time.perf_counter()
lh.sql("SELECT 1").collect()
t_first_query = time.perf_counter() - t2
lh.close()
print(json.dumps({"import": t_import, "cold": t_cold, "warm": t_warm, "first_query": t_first_query}))
"""


def measure(runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as warehouse:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, warehouse], capture_output=True, text=True, check=True
            )
        for key, value in json.loads(out.stdout.strip().splitlines()[-1]).items():
            samples.setdefault(key, []).append(value)
    return {key: statistics.median(values) for key, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M")
    medians = measure(args.runs)
    print(f"Lakehouse start-up, median of {args.runs} runs ({started})\n")
    print("| phase | seconds |\n|---|---|")
    print(f"| import dyntables | {medians['import']:.2f} |")
    print(
        f"| cold: new process, `Lakehouse(warehouse=...)` (JVM + Spark + Iceberg catalog) | {medians['cold']:.2f} |"
    )
    print(f"| warm: second `Lakehouse(...)` in the same process | {medians['warm']:.2f} |")
    print(f"| first query (`SELECT 1`) after start | {medians['first_query']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
