"""Fixed cost of a refresh on tiny data: the seeds' three-layer pipeline (join + filter,
aggregate, rank), one inserted order per round; medians per layer, plus NO_DATA. The
layers are AUTO, as a user creates them: the rank over all of the aggregate's rows is
recomputed (FULL, WINDOW_OVER_ALL_ROWS), the rest is incremental.

    .venv/bin/python -m bench.refresh_cost [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from dyntables import Lakehouse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "2"}) as lh,
    ):
        lh.sql(
            """
            CREATE TABLE o (id BIGINT, pid BIGINT, qty INT, price DECIMAL(10,2), status STRING);
            CREATE TABLE p (pid BIGINT, cat STRING);
            INSERT INTO p VALUES (1, 'A'), (2, 'B');
            INSERT INTO o VALUES (1, 1, 2, 10.5, 'done'), (2, 2, 1, 3.0, 'done');
            CREATE DYNAMIC TABLE dwd AS SELECT o.id, o.qty, o.price, p.cat FROM o JOIN p ON o.pid = p.pid
              WHERE o.status = 'done';
            CREATE DYNAMIC TABLE ads AS SELECT cat, COUNT(*) n, SUM(qty * price) gmv, AVG(price) ap FROM dwd GROUP BY cat;
            CREATE DYNAMIC TABLE lb AS SELECT cat, gmv, RANK() OVER (ORDER BY gmv DESC) rk FROM ads
            """
        )
        times: dict[str, list[float]] = {"dwd": [], "ads": [], "lb": [], "NO_DATA": []}
        modes = {"dwd": "INCREMENTAL", "ads": "INCREMENTAL", "lb": "FULL", "NO_DATA": "NO_DATA"}
        for i in range(args.rounds):
            lh.sql(f"INSERT INTO o VALUES ({10 + i}, 1, 1, 1.0, 'done')")
            for name in ("dwd", "ads", "lb"):
                t0 = time.perf_counter()
                mode = lh.sql(f"REFRESH DYNAMIC TABLE {name}").first().refresh_mode
                times[name].append(time.perf_counter() - t0)
                assert mode == modes[name], (name, mode)
            t0 = time.perf_counter()
            assert lh.sql("REFRESH DYNAMIC TABLE lb").first().refresh_mode == "NO_DATA"
            times["NO_DATA"].append(time.perf_counter() - t0)
    print(f"| layer | mode | median seconds ({args.rounds} rounds) |\n|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {modes[name]} | {statistics.median(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
