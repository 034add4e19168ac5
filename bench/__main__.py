"""``make bench``: the floor (NO_DATA, smallest job, smallest commit), then the seeds'
pipeline against INSERT OVERWRITE and a hand-written MERGE job, then tables and plots.

    make bench                                    # quick: 1M orders, 0.1% and 1% changes
    make bench ARGS="--orders 1M,10M --changes 0.01,0.1,1,10"
    make bench ARGS="--orders 100M ..."          # optional, needs time and disk

    make bench ARGS="tpch --sf 0.1 --rounds 3"   # the TPC-H workload instead (bench.tpch)

Arguments go to ``bench.pipeline``; results and plots land in ``bench/results/``. The
TPC-H workload is not part of the default run: it needs minutes even at SF 0.1.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench import floor, pipeline, report, tpch


def main(argv: list[str]) -> int:
    if argv[:1] == ["tpch"]:
        return tpch.main(argv[1:])
    floor.main(["--rounds", "10"])
    pipeline.main(argv)
    newest = max(Path("bench/results").glob("pipeline-*.json"), key=lambda p: p.stat().st_mtime)
    return report.main([str(newest)])


raise SystemExit(main(sys.argv[1:]))
