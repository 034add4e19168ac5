"""A star schema's wide table: a fact table LEFT JOINed with its dimensions (the usual
DWD layer), refreshed side by side as ``full`` (``INSERT OVERWRITE`` of the query) and
``inc`` (REFRESH_MODE = INCREMENTAL) and ``auto`` (the default mode, which weighs the
delta against a recompute before each refresh) after each round's batch: ``facts`` (new fact rows
only, a star's usual change) or ``dims`` (new fact rows and a new row in one dimension,
which changes which facts match). The three tables are checked to agree after every
round.

    .venv/bin/python -m bench.star                       # 100k facts, 4 dimensions
    .venv/bin/python -m bench.star --facts 1M,10M --dims 4 --rounds 3

Results go to ``bench/results/star-<time>.json`` (the run's arguments, machine and
measurements), a table of medians to stdout.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass

from bench.pipeline import Meter, refresh_side_by_side, run_sizes
from dyntables import Lakehouse

KINDS = ("facts", "dims")
METHODS = ("full", "inc", "auto")
DIM_ROWS = 1_000
CHANGE = 1_000


@dataclass(frozen=True)
class Measurement:
    facts: int
    dims: int
    kind: str
    round: int
    method: str
    seconds: float
    input_rows: int
    mode: str


def query(dims: int) -> str:
    names = ", ".join(f"d{i}.name AS name{i}" for i in range(dims))
    joins = " ".join(f"LEFT JOIN dim{i} d{i} ON f.k{i} = d{i}.k" for i in range(dims))
    return f"SELECT f.id, f.amount, {names} FROM fact f {joins}"


def run(facts: int, dims: int, rounds: int, kinds: list[str]) -> list[Measurement]:
    out: list[Measurement] = []
    with (
        tempfile.TemporaryDirectory() as warehouse,
        Lakehouse(warehouse=warehouse, conf={"spark.sql.shuffle.partitions": "4"}) as lh,
    ):
        spark = lh.spark
        keys = ", ".join(f"k{i} INT" for i in range(dims))
        spark.sql(f"CREATE TABLE fact (id BIGINT, {keys}, amount DECIMAL(10,2)) USING iceberg")
        values = ", ".join(f"CAST((id * {7 + i}) % {DIM_ROWS + 100} AS INT)" for i in range(dims))
        fact_rows = f"SELECT id, {values}, CAST(id % 10000 / 100.0 AS DECIMAL(10,2))"
        spark.sql(f"INSERT INTO fact {fact_rows} FROM range({facts})")
        for i in range(dims):  # ~9% of the fact keys find no dimension row
            spark.sql(f"CREATE TABLE dim{i} (k INT, name STRING) USING iceberg")
            spark.sql(
                f"INSERT INTO dim{i} SELECT CAST(id AS INT), concat('n{i}-', id) FROM range({DIM_ROWS})"
            )
        lh.sql(
            f"CREATE TABLE full_star AS {query(dims)};"
            f"CREATE DYNAMIC TABLE inc_star REFRESH_MODE = INCREMENTAL AS {query(dims)};"
            f"CREATE DYNAMIC TABLE auto_star AS {query(dims)}"
        )
        meter = Meter(spark)
        next_id, next_key = facts, DIM_ROWS
        for kind in kinds:
            for r in range(rounds):
                spark.sql(f"INSERT INTO fact {fact_rows} FROM range({next_id}, {next_id + CHANGE})")
                next_id += CHANGE
                if kind == "dims":
                    spark.sql(f"INSERT INTO dim{r % dims} VALUES ({next_key}, 'new-{next_key}')")
                    next_key += 1
                label = f"{facts:>11,} {kind:>5} round {r}"
                for method, seconds, rows, mode in refresh_side_by_side(
                    lh, meter, "star", query(dims), METHODS, label
                ):
                    out.append(Measurement(facts, dims, kind, r, method, seconds, rows, mode))
    return out


def summary(results: list[Measurement]) -> list[str]:
    lines = [
        "| facts | dims | batch | full s | inc s | full / inc | inc rows read | auto s | auto modes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for facts, dims, kind in sorted({(m.facts, m.dims, m.kind) for m in results}):
        cell = [m for m in results if (m.facts, m.dims, m.kind) == (facts, dims, kind)]
        full = statistics.median(m.seconds for m in cell if m.method == "full")
        inc = statistics.median(m.seconds for m in cell if m.method == "inc")
        rows = statistics.median(m.input_rows for m in cell if m.method == "inc")
        auto = statistics.median(m.seconds for m in cell if m.method == "auto")
        modes = "/".join(m.mode for m in cell if m.method == "auto")
        lines.append(
            f"| {facts:,} | {dims} | {kind} | {full:.2f} | {inc:.2f} | {full / inc:.1f}x "
            f"| {int(rows):,} | {auto:.2f} | {modes} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", default="100k", help="comma-separated sizes, e.g. 1M,10M")
    parser.add_argument("--dims", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    return run_sizes(
        "star",
        argv,
        args,
        args.facts,
        lambda facts: run(facts, args.dims, args.rounds, kinds),
        summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
