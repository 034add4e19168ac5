"""A real process crash during a refresh, for the differential suite's kill tests.

    python -m tests.differential.crash crash --warehouse W --table NAME --point P [--setup FILE]
        (optionally run the SQL script FILE first, then) refresh NAME in this process's
        own Spark and die with ``os._exit(KILLED)`` when the refresh reaches fault point
        P: no exception handler, ``finally`` block or lease release runs.
    python -m tests.differential.crash recover --warehouse W --table NAME --query SQL [--stale-after S]
        refresh NAME (taking over the dead process's lease once it is stale), check it
        against the oracle, print one JSON line: {"mode": ..., "failure": ...}.

Exit status: KILLED (17) when the point was reached, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

KILLED = 17
CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential.crash")
    parser.add_argument("action", choices=("crash", "recover"))
    parser.add_argument("--warehouse", required=True, type=Path)
    parser.add_argument("--table", required=True)
    parser.add_argument("--point", default="after_write")
    parser.add_argument("--setup", type=Path, default=None)
    parser.add_argument("--query", default=None)
    parser.add_argument("--stale-after", type=float, default=None)
    args = parser.parse_args(argv)

    from dyntables import Lakehouse
    from dyntables.refresh import faults

    lh = Lakehouse(warehouse=args.warehouse, conf=CONF)
    refresher = lh.commands.registry.refresher
    dt_name = lh.qualify(args.table)
    if args.action == "crash":
        if args.setup is not None:
            lh.sql(args.setup.read_text())

        def hook(point: str) -> None:
            if point == args.point:
                print(f"killed at {point}", flush=True)
                os._exit(KILLED)

        faults.install(hook)
        out = refresher.refresh(lh.commands.registry.get(dt_name), "MANUAL")
        print(json.dumps({"mode": out.refresh_mode, "reached": False}), flush=True)
        lh.close()
        return 0

    from tests.differential.harness import DtInfo, Failure, Harness

    if args.stale_after is not None:
        refresher.locks.stale_after = args.stale_after
    harness = Harness(lh)
    info = DtInfo(args.table, args.query or "", set(), None)
    failure = None
    mode = None
    try:
        out = refresher.refresh(lh.commands.registry.get(dt_name), "MANUAL")
        mode = out.refresh_mode
        harness.check(info, "after recovering from a killed refresh")
    except Failure as exc:
        failure = str(exc)
    except Exception as exc:  # the recovery refresh itself failed
        failure = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
    print(json.dumps({"mode": mode, "failure": failure, "rows": info.rows}), flush=True)
    lh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
