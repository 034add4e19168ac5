"""Refreshes around a nightly compaction of a merge-on-read source.

A fact table written merge-on-read (UPDATE and DELETE add delete files) is compacted
every night with ``rewrite_data_files``, which rewrites its files and drops their
delete files without changing a row. Each round here is one day of such a table:

  day        the day's rows, and deletes of some (which leave delete files), then a
             refresh of each dynamic table
  night      the compaction alone, then a refresh of each
  evening    late deletes of the day's rows (more delete files), then a refresh of each
  morning    the compaction, then late rows of the day just compacted, then a refresh
             of each: one range holding a compaction and a change after it

Two dynamic tables read it: an aggregate (AUTO) and the same query with
REFRESH_MODE = FULL (a table that recomputes on every change). The figures are the
refreshes' medians, their modes, and the source rows the aggregate's refresh read
(its ``rows_read`` stat). Run it on two commits to compare them:

    .venv/bin/python -m bench.compaction [--rows 1M] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter

from dyntables import Lakehouse

DAYS = 30
QUERY = (
    "SELECT day, category, COUNT(*) AS n, SUM(amount) AS total FROM events GROUP BY day, category"
)
MOR = (
    "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
    "'write.update.mode' = 'merge-on-read', 'write.merge.mode' = 'merge-on-read')"
)


def _rows(text: str) -> int:
    scale = {"K": 1_000, "M": 1_000_000}
    return int(float(text[:-1]) * scale[text[-1]]) if text[-1] in scale else int(text)


def _insert(lh: Lakehouse, first: int, count: int, day: int) -> None:
    lh.sql(
        f"INSERT INTO events SELECT id, date_add(DATE '2026-01-01', {day}), "
        f"concat('c', id % 20), CAST(id % 1000 AS DECIMAL(10, 2)) / 10 "
        f"FROM range({first}, {first + count})"
    )


def measure(rows: int, rounds: int) -> dict[str, object]:
    per_day = rows // DAYS
    change = max(1, rows // 1000)
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "2"}) as lh,
    ):
        lh.sql(
            f"CREATE TABLE events (id BIGINT, day DATE, category STRING, amount DECIMAL(10, 2)) "
            f"PARTITIONED BY (day) {MOR}"
        )
        lh.sql(
            f"INSERT INTO events SELECT id, date_add(DATE '2026-01-01', CAST(id % {DAYS} AS INT)), "
            f"concat('c', id % 20), CAST(id % 1000 AS DECIMAL(10, 2)) / 10 FROM range({rows})"
        )
        lh.sql(f"CREATE DYNAMIC TABLE agg REFRESH_MODE = AUTO AS {QUERY}")
        lh.sql(f"CREATE DYNAMIC TABLE agg_full REFRESH_MODE = FULL AS {QUERY}")
        seconds: dict[str, list[float]] = {}
        modes: dict[str, Counter[str]] = {}
        read: dict[str, list[int]] = {}

        def refresh(step: str) -> None:
            for dt in ("agg", "agg_full"):
                t0 = time.perf_counter()
                mode = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode
                key = f"{step}: {dt}"
                seconds.setdefault(key, []).append(time.perf_counter() - t0)
                modes.setdefault(key, Counter())[mode] += 1
                if dt == "agg":
                    stats = json.loads(
                        lh.sql("SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = 'agg' LIMIT 1")
                        .first()
                        .stats
                    )
                    read.setdefault(key, []).append(int(stats.get("rows_read.events", 0)))

        first, day = rows, DAYS
        compact = (
            "CALL lakehouse.system.rewrite_data_files(table => 'public.events', "
            "options => map('rewrite-all', 'true'))"
        )
        for _ in range(rounds):
            today = f"date_add(DATE '2026-01-01', {day - 1})"
            _insert(lh, first, per_day, day - 1)  # the day's rows
            first += per_day
            lh.sql(f"DELETE FROM events WHERE day = {today} AND id % 97 = 0")
            refresh("day")
            lh.sql(compact)
            refresh("night")
            lh.sql(f"DELETE FROM events WHERE day = {today} AND id % 89 = 0")
            refresh("evening")
            lh.sql(compact)
            _insert(lh, first, change, day - 1)  # late rows of the day just compacted
            first += change
            day += 1
            refresh("morning")
            _check(lh)
        return {
            "rows": rows,
            "rows per day": per_day,
            "new rows per change": change,
            "rounds": rounds,
            "seconds": {k: statistics.median(v) for k, v in seconds.items()},
            "modes": {k: dict(v) for k, v in modes.items()},
            "rows read": {k: statistics.median(v) for k, v in read.items()},
        }


def _check(lh: Lakehouse) -> None:
    """Both tables hold the query's rows (a benchmark of wrong answers measures nothing)."""
    for dt in ("agg", "agg_full"):
        differ = lh.spark.sql(
            f"(SELECT * FROM {lh.qualify(dt).sql()} EXCEPT ALL {_pinned(lh)}) UNION ALL "
            f"({_pinned(lh)} EXCEPT ALL SELECT * FROM {lh.qualify(dt).sql()})"
        ).count()
        assert differ == 0, f"{dt} differs from its query in {differ} rows"


def _pinned(lh: Lakehouse) -> str:
    return QUERY.replace("FROM events", f"FROM {lh.qualify('events').sql()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="1M")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    result = measure(_rows(args.rows), args.rounds)
    print(
        f"{result['rows']:,} rows over {DAYS} days, {result['rows per day']:,} rows a day, "
        f"{result['new rows per change']:,} late rows, medians of {result['rounds']} rounds\n"
    )
    print("| step | table | s | modes | rows read |\n|---|---|---|---|---|")
    seconds, modes, read = result["seconds"], result["modes"], result["rows read"]
    assert isinstance(seconds, dict) and isinstance(modes, dict) and isinstance(read, dict)
    for key, value in seconds.items():
        step, table = key.split(": ")
        shown = ", ".join(f"{m} {n}" for m, n in sorted(modes[key].items()))
        print(f"| {step} | {table} | {value:.2f} | {shown} | {read.get(key, '')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
