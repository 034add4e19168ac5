"""The floor under every refresh on this machine: a NO_DATA refresh (metadata only),
the smallest Spark job, and the smallest Iceberg commit (one-row INSERT).

    .venv/bin/python -m bench.floor [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from dyntables import Lakehouse
from dyntables.engine.metrics import jobs_started


def measure(rounds: int) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "2"}) as lh,
    ):
        lh.sql(
            "CREATE TABLE s (k INT, v INT); INSERT INTO s VALUES (1, 1);"
            "CREATE DYNAMIC TABLE d AS SELECT k, SUM(v) AS v FROM s GROUP BY k;"
            "CREATE TABLE t (x INT)"
        )
        times: dict[str, list[float]] = {
            "NO_DATA refresh": [],
            "NO_DATA refresh, its result read (.first())": [],
            "smallest Spark job": [],
            "one-row INSERT (job + commit)": [],
        }
        jobs_in_no_data = jobs_in_read = 0
        for i in range(rounds):
            before = jobs_started(lh.spark)
            t0 = time.perf_counter()
            result = lh.sql("REFRESH DYNAMIC TABLE d")  # the statement's result frame is lazy
            times["NO_DATA refresh"].append(time.perf_counter() - t0)
            jobs_in_no_data += jobs_started(lh.spark) - before
            assert result.first().refresh_mode == "NO_DATA"
            before = jobs_started(lh.spark)
            t0 = time.perf_counter()
            assert lh.sql("REFRESH DYNAMIC TABLE d").first().refresh_mode == "NO_DATA"
            times["NO_DATA refresh, its result read (.first())"].append(time.perf_counter() - t0)
            jobs_in_read += jobs_started(lh.spark) - before
            t0 = time.perf_counter()
            lh.spark.sql("SELECT 1").collect()
            times["smallest Spark job"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            lh.spark.sql(f"INSERT INTO t VALUES ({i})")
            times["one-row INSERT (job + commit)"].append(time.perf_counter() - t0)
    out = {k: statistics.median(v) for k, v in times.items()}
    out["Spark jobs per NO_DATA refresh"] = jobs_in_no_data / rounds
    out["Spark jobs per NO_DATA refresh, its result read"] = jobs_in_read / rounds
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    result = measure(args.rounds)
    print(f"| floor | median ({args.rounds} rounds) |\n|---|---|")
    for name, value in result.items():
        print(f"| {name} | {value:.3f}{'' if name.startswith('Spark jobs') else ' s'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
