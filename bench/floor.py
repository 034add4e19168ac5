"""The floor under every refresh on this machine: a NO_DATA refresh (metadata only),
the smallest Spark job, and the smallest Iceberg commit (one-row INSERT).

And the floor under an aggregate's refresh: a 50-group aggregate updated from 1,000 new
rows of its source (an incremental append scan) by one hand-tuned statement, ``INSERT
OVERWRITE agg SELECT ... FROM (agg UNION ALL <the new rows aggregated>) GROUP BY ...``:
one job and one commit, what no refresh of an aggregate can undercut; then the same
into two such tables at once (an aggregate that keeps its state beside its table); then
a dynamic table's INCREMENTAL refresh of the same aggregate, side by side. The change's
size, not the source's, sets all three: the source is only ever read by its new files.

    .venv/bin/python -m bench.floor [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
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
        times.update(_aggregate_floor(lh, rounds))
    out = {k: statistics.median(v) for k, v in times.items()}
    out["Spark jobs per NO_DATA refresh"] = jobs_in_no_data / rounds
    out["Spark jobs per NO_DATA refresh, its result read"] = jobs_in_read / rounds
    return out


CATEGORIES = 50
NEW_ROWS = 1_000
AGGREGATE = "SELECT category, COUNT(*) AS n, SUM(amount) AS total FROM {src} GROUP BY category"


def _aggregate_floor(lh: Lakehouse, rounds: int) -> dict[str, list[float]]:
    spark = lh.spark
    name = lh.qualify("f").sql()
    lh.sql(
        f"""
        CREATE TABLE f (id BIGINT, category STRING, amount DECIMAL(10,2));
        INSERT INTO f SELECT id, concat('c', id % {CATEGORIES}), id % 1000 / 10 FROM range(100000);
        CREATE TABLE a1 AS {AGGREGATE.format(src="f")};
        CREATE TABLE a2 AS {AGGREGATE.format(src="f")};
        CREATE TABLE a3 AS {AGGREGATE.format(src="f")};
        CREATE DYNAMIC TABLE g REFRESH_MODE = INCREMENTAL AS
          SELECT category, COUNT(*) AS n, SUM(amount) AS total, AVG(amount) AS mean FROM f GROUP BY category
        """
    )

    def snapshot() -> int:
        return int(
            spark.sql(
                f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1"
            ).first()[0]
        )

    def update(table: str, since: int, until: int) -> None:
        new_rows = (
            spark.read.format("iceberg")
            .option("start-snapshot-id", str(since))
            .option("end-snapshot-id", str(until))
            .load(name)
        )
        view = f"new_{table}"
        new_rows.createOrReplaceTempView(view)
        target = lh.qualify(table).sql()
        spark.sql(
            f"INSERT OVERWRITE {target} SELECT category, SUM(n), SUM(total) FROM ("
            f"SELECT * FROM {target} UNION ALL {AGGREGATE.format(src=view)}) GROUP BY category"
        )

    def both(since: int, until: int) -> None:
        failed: list[BaseException] = []

        def other() -> None:
            try:
                update("a3", since, until)
            except BaseException as exc:  # re-raised below
                failed.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        update("a2", since, until)
        thread.join()
        if failed:
            raise failed[0]

    def refresh(table: str) -> None:
        assert lh.sql(f"REFRESH DYNAMIC TABLE {table}").first().refresh_mode == "INCREMENTAL"

    times: dict[str, list[float]] = {
        "aggregate floor: one statement (job + commit)": [],
        "aggregate floor: two tables at once": [],
        "aggregate DT, INCREMENTAL refresh": [],
    }
    first = 100_000
    for _ in range(rounds):
        since = snapshot()
        spark.sql(
            f"INSERT INTO f SELECT id, concat('c', id % {CATEGORIES}), id % 1000 / 10 "
            f"FROM range({first}, {first + NEW_ROWS})"
        )
        first += NEW_ROWS
        until = snapshot()
        for label, step, args in (
            ("aggregate floor: one statement (job + commit)", update, ("a1", since, until)),
            ("aggregate floor: two tables at once", both, (since, until)),
            ("aggregate DT, INCREMENTAL refresh", refresh, ("g",)),
        ):
            t0 = time.perf_counter()
            step(*args)
            times[label].append(time.perf_counter() - t0)
    return times


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
