"""Where a refresh's time goes: the Spark jobs each layer's INCREMENTAL refresh runs, when
they start and how long they take; the gaps between them are driver-side work (analysis,
planning, code generation, Iceberg commits).

    .venv/bin/python -m bench.anatomy [--orders 100k] [--change 100] [--kind insert|mixed] [--rounds 3]

The seeds' three layers over ``bench.pipeline``'s workload and layout (dwd partitioned by
day), with its insert or mixed batches; the last round is printed job by job, every
round as wall time and job count per layer.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from bench.pipeline import ADS, DWD, DWD_LAYOUT, DWS, LAYERS, Workload, _seq, parse_count
from dyntables import Lakehouse


def _jobs(store: Any) -> dict[int, Any]:
    return {int(j.jobId()): j for j in _seq(store.jobsList(None))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", default="100k")
    parser.add_argument("--change", type=int, default=100)
    parser.add_argument("--kind", choices=("insert", "mixed"), default="insert")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "2"}) as lh,
    ):
        work = Workload(lh, parse_count(args.orders))
        work.load()
        lh.sql(
            f"CREATE DYNAMIC TABLE dwd {DWD_LAYOUT} REFRESH_MODE = INCREMENTAL AS {DWD};"
            f"CREATE DYNAMIC TABLE dws REFRESH_MODE = INCREMENTAL AS {DWS.format(dwd='dwd')};"
            f"CREATE DYNAMIC TABLE ads REFRESH_MODE = INCREMENTAL AS {ADS.format(dws='dws')}"
        )
        store = lh.spark.sparkContext._jsc.sc().statusStore()
        for r in range(args.rounds):
            work.apply(args.change, args.kind)
            for layer in LAYERS:
                before = set(_jobs(store))
                t0 = time.time()
                mode = lh.sql(f"REFRESH DYNAMIC TABLE {layer}").first().refresh_mode
                seconds = time.time() - t0
                new = sorted((i, j) for i, j in _jobs(store).items() if i not in before)
                print(f"round {r} {layer}: {mode} {seconds:.2f}s, {len(new)} Spark jobs")
                if r != args.rounds - 1:
                    continue
                for i, job in new:
                    start = job.submissionTime().get().getTime() / 1000 - t0
                    done = job.completionTime()
                    # The status store is fed by an asynchronous listener: a job the
                    # refresh waited for may not be marked complete there yet.
                    took = (
                        f"{done.get().getTime() / 1000 - t0 - start:4.2f}s"
                        if done.isDefined()
                        else "  ?  "
                    )
                    print(f"    job {i:5d} at +{start:5.2f}s took {took}  {job.name()[:70]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
