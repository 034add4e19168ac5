"""The long differential profile: ``python -m tests.differential.fuzz [--budget SECONDS] [--seed N]``
(``make fuzz ARGS="--budget 600"``).

It starts its own Lakehouse on a temporary warehouse and runs generated scenarios
(seed N, N+1, ...; shapes in turn) until the time budget is spent, checking every
refresh against the oracle (see ``tests/differential/harness.py``). A failing scenario
is shrunk (steps and rows removed while it still fails the same way) and written as a
``.scn`` file to add to ``tests/differential/scenarios/``; ``--seed N --count 1
--shape S`` replays one generated scenario exactly, ``--replay FILE.scn`` a file.
Exit status 1 when a scenario failed.

The summary ends with a coverage table, one row per query shape (a query counts in
every shape it contains; ``(all)`` counts each query once):

  shape      a feature of the query: filter, inner_join, left_join, right_join,
             full_join, self_join, join_residual (extra ON condition), semi_join
             (EXISTS / IN), anti_join (NOT EXISTS), not_in (NOT IN (subquery)),
             scalar_subquery (an aggregate in an expression, correlated_subquery when
             by equalities with the outer query), group_by, grouping_sets (ROLLUP,
             CUBE, GROUPING SETS), global_agg, having,
             min_max, avg, nested_agg (aggregate over an aggregate), distinct,
             union_all, union, window_rownum, window_rank, window_agg, window_dedup
             (ROW_NUMBER() = 1), subquery (in FROM), cte, dt_over_dt (a dynamic table
             reading another), twin (the same query refreshed once at the end),
             rejected (built outside the compiler's grammar; rejected:<kind> says how)
  queries    dynamic tables created with such a query
  rejected   of those, how many the compiler rejected (they must always refresh FULL)
  refreshes  refreshes of those tables that were checked (all kinds below)
  INCR       refreshes that ran INCREMENTAL
  FULL       refreshes that ran FULL on their own (compiler rejection, ...)
  forced     FULL refreshes the suite forced (they must not change the contents)
  NO_DATA    refreshes with no source change (they must make no snapshot)
  faults     refreshes failed on purpose at a fault point (then recovered)
  incr%      INCR / (INCR + FULL): how often a refresh with changes ran incrementally
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from tests.differential.generate import (
    SHAPES,
    Scenario,
    Step,
    parse_scenario,
    quick_scenarios,
    scenario_from_seed,
)
from tests.differential.harness import Harness, Result, Stats, compacting_from


def shrink(harness: Harness, failing: Result, budget: float, log=print) -> Scenario:
    """Greedy shrinking: drop what follows the failing step, then steps, DTs and rows
    one at a time, keeping each removal while the scenario still fails the same way."""
    deadline = time.monotonic() + budget
    scenario = failing.scenario
    if failing.failed_step is not None:
        scenario = replace(scenario, steps=scenario.steps[: failing.failed_step + 1])
    mismatch = failing.mismatch

    def still_fails(candidate: Scenario) -> bool:
        result = harness.run(candidate)
        return not result.ok and result.error is None and result.mismatch == mismatch

    def candidates(sc: Scenario):
        steps = sc.steps
        # a whole dynamic table (and every step naming it)
        for dt in reversed(sc.dynamic_tables[1:]):
            kept = [s for s in steps if dt not in s.args[:2] or s.op == "sql"]
            yield replace(sc, steps=kept, tags={k: v for k, v in sc.tags.items() if k != dt})
        # one step at a time, latest first (never a CREATE TABLE)
        for i in range(len(steps) - 2, -1, -1):
            s = steps[i]
            if s.op == "create_dt" or (
                s.op == "sql" and s.args[0].upper().startswith("CREATE TABLE")
            ):
                continue
            yield replace(sc, steps=steps[:i] + steps[i + 1 :])
        # one row of a multi-row INSERT
        for i, s in enumerate(steps):
            if (
                s.op != "sql"
                or " VALUES (" not in s.args[0]
                or not s.args[0].startswith("INSERT INTO")
            ):
                continue
            head, rows = s.args[0].split(" VALUES ", 1)
            parts = _split_rows(rows)
            for j in range(len(parts)):
                if len(parts) > 1:
                    text = f"{head} VALUES {', '.join(parts[:j] + parts[j + 1 :])}"
                    yield replace(sc, steps=steps[:i] + [Step("sql", (text,))] + steps[i + 1 :])

    improved = True
    tries = 0
    while improved and time.monotonic() < deadline:
        improved = False
        for candidate in candidates(scenario):
            if time.monotonic() >= deadline:
                break
            tries += 1
            if still_fails(candidate):
                scenario = candidate
                improved = True
                log(f"  shrink: {len(scenario.steps)} steps")
                break
    log(f"  shrink: {tries} tries, {len(scenario.steps)} steps left")
    return replace(scenario, name=f"{scenario.name}-shrunk")


def markdown_report(stats: Stats, seed: int, argv: list[str] | None, seconds: float) -> str:
    """The run as a README section body: command, outcome, coverage table."""
    args = list(sys.argv[1:] if argv is None else argv)
    for option in ("--report", "--out", "--warehouse"):  # where output goes: not the run
        while option in args:
            i = args.index(option)
            del args[i : i + 2]
    if "--seed" not in args:
        args += ["--seed", str(seed)]
    modes = stats.modes
    lines = [
        f'`make fuzz ARGS="{" ".join(args)}"` ({time.strftime("%Y-%m-%d")}, {seconds / 60:.0f} min'
        f" on {os.cpu_count()} cores): {stats.scenarios} scenarios, {stats.queries} queries "
        f"({sum(stats.compiler_codes.values())} outside the compiler's grammar), {stats.refreshes} "
        f"refreshes checked against the oracle: INCREMENTAL {modes['INCREMENTAL']}, FULL "
        f"{modes['FULL']}, forced FULL {modes['forced']}, NO_DATA {modes['NO_DATA']}, injected "
        f"failures {modes['faults']}; **{stats.mismatches} mismatches**, {stats.errors} other "
        "failures.",
        "",
    ]
    if stats.full_reasons:
        reasons = ", ".join(f"`{k}` {v}" for k, v in stats.full_reasons.most_common())
        lines += [f"FULL refreshes by reason: {reasons}.", ""]
    lines.append(stats.coverage_table())
    return "\n".join(lines) + "\n"


def _file_stem(name: str) -> str:
    """A file name for a scenario (its ``-- name:`` may be a sentence with slashes)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return stem[:80] or "scenario"


def _split_rows(values: str) -> list[str]:
    rows, depth, cur, quoted = [], 0, "", False
    for c in values:
        if c == "'":
            quoted = not quoted
        if not quoted and c == "(":
            depth += 1
        if not quoted and c == ")":
            depth -= 1
        if not quoted and depth == 0 and c == ",":
            rows.append(cur.strip())
            cur = ""
            continue
        cur += c
    if cur.strip():
        rows.append(cur.strip())
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.differential.fuzz", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--budget", type=float, default=600.0, help="seconds to spend generating (default 600)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="first seed (default: from the clock; printed)"
    )
    parser.add_argument("--count", type=int, default=None, help="stop after this many scenarios")
    parser.add_argument(
        "--shape", choices=SHAPES, action="append", help="only these shapes (repeatable)"
    )
    parser.add_argument("--no-faults", action="store_true", help="do not inject refresh failures")
    parser.add_argument(
        "--quoted-names",
        action="store_true",
        help="name the tables so that Spark reads them only back-quoted (`t0-<run>`)",
    )
    parser.add_argument(
        "--ill-conditioned",
        "--with-known-bugs",
        dest="ill_conditioned",
        action="store_true",
        help="also 1e17 / -1e17 in DOUBLE columns: sums that depend on the order of additions, "
        "where the oracle (Spark's own SUM) is not exact either",
    )
    parser.add_argument(
        "--replay", type=Path, action="append", help="run a .scn scenario file instead"
    )
    parser.add_argument(
        "--quick", action="store_true", help="run the quick profile's generated scenarios instead"
    )
    parser.add_argument(
        "--shrink-budget", type=float, default=300.0, help="seconds to shrink each failure"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for failing scenarios (default: a temp folder)",
    )
    parser.add_argument(
        "--warehouse", type=Path, default=None, help="warehouse folder (default: a temp folder)"
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="also write the summary and coverage table as markdown (for the README)",
    )
    parser.add_argument(
        "--compact-at",
        type=int,
        default=None,
        help="compact a dynamic table's files from this many (not 64): the compiler's "
        "paths over the tables' own compactions",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every refresh")
    args = parser.parse_args(argv)

    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    shapes = args.shape or list(SHAPES)
    out_dir = args.out or Path(tempfile.gettempdir()) / f"dyntables-fuzz-{seed}"
    # a warehouse of our own is removed at the end: failing scenarios are written apart,
    # and a day of fuzzing left gigabytes of warehouses in the temp folder
    scratch = None if args.warehouse else tempfile.TemporaryDirectory(prefix="dyntables-fuzz-wh-")
    warehouse = Path(scratch.name) if scratch else args.warehouse
    try:
        return _run(args, seed, shapes, out_dir, warehouse, argv)
    finally:
        if scratch is not None:
            scratch.cleanup()


def _run(
    args: argparse.Namespace,
    seed: int,
    shapes: list[str],
    out_dir: Path,
    warehouse: Path,
    argv: list[str] | None,
) -> int:
    print(f"fuzz: seed {seed}, budget {args.budget:.0f} s, warehouse {warehouse}", flush=True)

    from dyntables import Lakehouse

    stats = Stats()
    failures: list[tuple[Result, Path]] = []
    started = time.monotonic()
    compacting = (
        compacting_from(args.compact_at)
        if args.compact_at is not None
        else contextlib.nullcontext()
    )
    with (
        compacting,
        Lakehouse(
            warehouse=warehouse,
            conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        ) as lh,
    ):
        harness = Harness(
            lh, stats, log=print if args.verbose else None, quoted_names=args.quoted_names or None
        )
        if args.replay or args.quick:
            plan = [(parse_scenario(p.read_text(), p.stem), None) for p in args.replay or []]
            plan += [(sc, None) for sc in (quick_scenarios() if args.quick else [])]
        else:
            plan = None
        i = 0
        while True:
            if plan is not None:
                if i >= len(plan):
                    break
                scenario = plan[i][0]
            else:
                if args.count is not None and i >= args.count:
                    break
                if time.monotonic() - started >= args.budget:
                    break
                shape = shapes[i % len(shapes)]
                scenario = scenario_from_seed(
                    seed + i, shape, faults=not args.no_faults, ill_conditioned=args.ill_conditioned
                )
            result = harness.run(scenario)
            status = "ok" if result.ok else ("ERROR(generator)" if result.error else "FAILED")
            print(
                f"[{time.monotonic() - started:6.0f}s] {scenario.name[:22]:<22} {scenario.shape or '-':<13} "
                f"{status:<8} {result.seconds:5.1f}s  {result.modes()}",
                flush=True,
            )
            if not result.ok:
                print(result.report(), flush=True)
            if not result.ok and result.error is None:
                # the shrinker's replays are counted apart: the summary counts scenarios
                # the fuzz generated (they made one mismatch read as 11)
                shrinker = Harness(lh, Stats(), quoted_names=harness.quoted_names)
                small = (
                    shrink(shrinker, result, args.shrink_budget)
                    if args.shrink_budget > 0
                    else scenario
                )
                out_dir.mkdir(parents=True, exist_ok=True)
                path = out_dir / f"{_file_stem(scenario.name)}.scn"
                header = "\n".join(f"-- failure: {f}" for f in result.failures)
                path.write_text(small.to_text().replace("\n\n", f"\n{header}\n\n", 1))
                failures.append((result, path))
                print(f"  -> written {path}", flush=True)
            i += 1
    print()
    print("=" * 78)
    print(f"differential fuzz summary (seed {seed}, {time.monotonic() - started:.0f} s)")
    print(stats.summary())
    print()
    print(stats.coverage_table())
    if args.report is not None:
        args.report.write_text(markdown_report(stats, seed, argv, time.monotonic() - started))
        print(f"\nmarkdown report: {args.report}")
    if failures:
        print()
        print("failing scenarios (add them to tests/differential/scenarios/):")
        for result, path in failures:
            print(f"  {path}: {result.failures[0][:200]}")
    return 1 if failures or stats.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
