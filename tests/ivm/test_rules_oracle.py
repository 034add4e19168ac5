"""Every delta rule against the oracle, on data made to hit the hard cases: duplicates,
NULLs in data/keys/join keys, rows moving between groups and join partners, a group's
last row deleted, the current MIN/MAX deleted, SUM going NULL, exact DECIMAL AVG, a row
inserted and deleted within one refresh window. Each refresh must be INCREMENTAL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from dyntables import Lakehouse
from tests.oracle import assert_oracle

SETUP = """
CREATE TABLE {o} (id INT, k STRING, p INT, qty INT, price DECIMAL(10,2), x DOUBLE, ts TIMESTAMP, d DATE);
CREATE TABLE {p} (p INT, cat STRING, brand STRING);
INSERT INTO {p} VALUES (1, 'A', 'x'), (2, 'B', 'y'), (3, 'B', NULL), (4, NULL, 'z'), (NULL, 'N', 'n'), (2, 'B2', 'y');
INSERT INTO {o} VALUES
  (1, 'a', 1, 2, 10.50, 1.5, TIMESTAMP '2024-01-01 10:15:00', DATE '2024-01-01'),
  (2, 'a', 1, 2, 10.50, 1.5, TIMESTAMP '2024-01-01 10:15:00', DATE '2024-01-01'),
  (3, 'b', 2, 1, 99.99, NULL, TIMESTAMP '2024-01-01 11:45:00', DATE '2024-01-02'),
  (4, NULL, 3, NULL, NULL, 2.25, TIMESTAMP '2024-01-02 00:00:00', NULL),
  (5, 'c', NULL, 5, 0.01, -3.0, NULL, DATE '2024-01-03'),
  (6, 'c', 9, 1, 5.00, 0.0, TIMESTAMP '2024-01-03 23:59:59', DATE '2024-01-03')
"""

# Each step is one or more commits, followed by one refresh and the oracle check.
STEPS = [
    # duplicates, NULLs, new join partners; then an update that moves rows between
    # groups and join partners (two commits in one refresh window)
    "INSERT INTO {o} VALUES (7, 'a', 1, 2, 10.50, 1.5, TIMESTAMP '2024-01-01 10:15:00', DATE '2024-01-01'), "
    "(8, NULL, NULL, NULL, NULL, NULL, NULL, NULL), (9, 'd', 4, 3, 1.10, 7.5, TIMESTAMP '2024-01-04 12:00:00', DATE '2024-01-04'); "
    "UPDATE {o} SET k = 'b', p = 2 WHERE id IN (1, 9)",
    # a group's last row and another's current MIN/MAX deleted; then SUM/AVG/MIN/MAX of a
    # group become NULL as its last non-null values go
    "DELETE FROM {o} WHERE k = 'd' OR id = 5 OR price = 99.99; "
    "UPDATE {o} SET qty = NULL, price = NULL, x = NULL WHERE k = 'c'",
    # a row inserted and deleted within one refresh window, among other commits
    "INSERT INTO {o} VALUES (10, 'e', 2, 1, 3.33, 1.0, TIMESTAMP '2024-01-05 01:00:00', DATE '2024-01-05'); "
    "DELETE FROM {o} WHERE id = 10; INSERT INTO {o} VALUES (11, 'a', 3, 4, 2.22, 2.0, TIMESTAMP '2024-01-05 02:00:00', DATE '2024-01-05')",
    # the dimension side changes: matches gained and lost; in the same window facts move
    # to a partner that changes, and a new one meets a new partner
    "DELETE FROM {p} WHERE p = 1; INSERT INTO {p} VALUES (9, 'C', 'w'), (1, 'A2', 'x'); "
    "UPDATE {p} SET cat = 'Z' WHERE p = 2; DELETE FROM {p} WHERE p = 3; "
    "UPDATE {o} SET p = 1 WHERE id = 4; "
    "INSERT INTO {o} VALUES (13, 'f', 9, 1, 1.00, 1.0, TIMESTAMP '2024-01-05 03:00:00', DATE '2024-01-05')",
    # everything goes, one row comes back
    "DELETE FROM {o}; INSERT INTO {o} VALUES (12, 'a', 1, 1, 1.00, 1.0, TIMESTAMP '2024-01-06 00:00:00', DATE '2024-01-06')",
]

QUERIES = {
    "filter_project": "SELECT id, upper(k) AS uk, qty * price AS amount, CASE WHEN x > 1 THEN 'hi' ELSE 'lo' END AS band, "
    "CAST(ts AS DATE) AS day, YEAR(ts) y, MONTH(ts) m, DAY(ts) dd, HOUR(ts) h, MINUTE(ts) mi, "
    "concat(k, '-', CAST(p AS STRING)) AS label FROM {o} WHERE qty IS NULL OR qty > 1",
    "bag_projection": "SELECT k, qty FROM {o}",
    "inner_join": "SELECT o.id, o.k, p.cat, p.brand FROM {o} o JOIN {p} p ON o.p = p.p",
    "three_way_join": "SELECT o.id, p.cat, q.brand FROM {o} o JOIN {p} p ON o.p = p.p JOIN {p} q ON p.cat = q.cat",
    "left_join": "SELECT o.id, o.k, p.cat FROM {o} o LEFT JOIN {p} p ON o.p = p.p",
    "left_join_filtered_right": "SELECT o.id, p.cat FROM {o} o LEFT JOIN {p} p ON o.p = p.p AND p.brand <> 'y'",
    "right_join": "SELECT o.id, p.p, p.cat FROM {o} o RIGHT JOIN {p} p ON o.p = p.p",
    "full_join": "SELECT o.id, o.p AS op, p.p AS pp, p.cat FROM {o} o FULL OUTER JOIN {p} p ON o.p = p.p",
    # a chain (the lower join's delta read twice, so computed once), one side at a time
    # unchanged (then a LEFT JOIN's delta is its kept side's delta LEFT JOIN the other)
    "left_join_chain": "SELECT o.id, p.cat, q.brand, r.p AS rp FROM {o} o LEFT JOIN {p} p ON o.p = p.p "
    "LEFT JOIN {p} q ON p.cat = q.cat AND q.brand IS NOT NULL RIGHT JOIN {p} r ON r.p = o.p",
    "exists": "SELECT o.id, o.k FROM {o} o WHERE EXISTS (SELECT 1 FROM {p} p WHERE p.p = o.p AND p.cat <> 'N')",
    "not_exists": "SELECT o.id, o.k FROM {o} o WHERE NOT EXISTS (SELECT 1 FROM {p} p WHERE p.p = o.p)",
    # NULL keys that match (<=>): keyed by whether the key is NULL and by its value
    "null_safe_left_join": "SELECT o.id, p.cat FROM {o} o LEFT JOIN {p} p ON o.p <=> p.p",
    "null_safe_not_exists": "SELECT o.id FROM {o} o WHERE NOT EXISTS (SELECT 1 FROM {p} p WHERE p.p <=> o.p AND p.cat <> 'B')",
    # no equality: a change of the other side touches every kept row
    "band_join": "SELECT o.id, p.cat FROM {o} o LEFT JOIN {p} p ON o.qty BETWEEN p.p AND p.p + 1",
    "right_band_join": "SELECT o.id, p.p FROM {o} o RIGHT JOIN {p} p ON o.p > p.p",
    "exists_non_equi": "SELECT o.id FROM {o} o WHERE EXISTS (SELECT 1 FROM {p} p WHERE p.p > o.qty)",
    "not_exists_non_equi": "SELECT o.id, o.k FROM {o} o WHERE NOT EXISTS (SELECT 1 FROM {p} p WHERE p.p < o.p AND p.cat IS NOT NULL)",
    # an uncorrelated EXISTS turning true (cat 'Z' appears)
    "exists_uncorrelated": "SELECT o.id FROM {o} o WHERE EXISTS (SELECT 1 FROM {p} p WHERE p.cat = 'Z')",
    "in_subquery": "SELECT o.id FROM {o} o WHERE o.p IN (SELECT p FROM {p} WHERE brand IS NOT NULL)",
    "group_by": "SELECT k, COUNT(*) AS n, COUNT(qty) AS nq, SUM(qty) AS sq, SUM(price) AS sp, AVG(price) AS ap, "
    "AVG(qty) AS aq, MIN(price) AS lo, MAX(ts) AS hi, SUM(x) AS sx, AVG(x) AS ax FROM {o} GROUP BY k",
    "count_distinct": "SELECT k, COUNT(DISTINCT p) AS dp, COUNT(DISTINCT price) AS dpr, COUNT(*) AS n FROM {o} GROUP BY k",
    "global_count_distinct": "SELECT COUNT(DISTINCT k) AS dk FROM {o}",
    "having": "SELECT k, SUM(qty) AS sq FROM {o} GROUP BY k HAVING COUNT(*) > 1",
    "global_aggregate": "SELECT COUNT(*) AS n, SUM(price) AS s, AVG(price) AS a, MIN(x) AS lo, MAX(d) AS hi FROM {o}",
    "join_then_group": "SELECT p.cat, COUNT(*) AS n, SUM(o.qty * o.price) AS gmv, AVG(o.price) AS ap "
    "FROM {o} o JOIN {p} p ON o.p = p.p GROUP BY p.cat",
    "time_buckets": "SELECT date_trunc('HOUR', ts) AS hr, d, COUNT(*) AS n, SUM(qty) AS q FROM {o} GROUP BY date_trunc('HOUR', ts), d",
    "window_bucket": "SELECT window(ts, '1 hour') AS w, COUNT(*) AS n, SUM(qty) AS q FROM {o} GROUP BY window(ts, '1 hour')",
    "boolean_and_decimal_keys": "SELECT price, qty > 1 AS big, COUNT(*) AS n FROM {o} GROUP BY price, qty > 1",
    "distinct": "SELECT DISTINCT k, p FROM {o}",
    "union_all": "SELECT k AS v FROM {o} UNION ALL SELECT cat AS v FROM {p}",
    "union": "SELECT k AS v FROM {o} UNION SELECT cat AS v FROM {p}",
    "window_partition": "SELECT id, k, SUM(qty) OVER (PARTITION BY k) AS kq, RANK() OVER (PARTITION BY k ORDER BY id) AS r FROM {o}",
    "row_number_dedup": "SELECT id, k, p FROM (SELECT id, k, p, ROW_NUMBER() OVER (PARTITION BY k ORDER BY id DESC) AS rn "
    "FROM {o}) t WHERE rn = 1",
    "cte_and_subquery": "WITH big AS (SELECT * FROM {o} WHERE qty >= 1) SELECT t.k, t.n FROM "
    "(SELECT k, COUNT(*) AS n FROM big GROUP BY k) t WHERE t.n > 0",
    "aggregate_of_aggregate": "SELECT n, COUNT(*) AS groups FROM (SELECT k, COUNT(*) AS n FROM {o} GROUP BY k) g GROUP BY n",
    "rank_all_rows": "SELECT id, k, qty, RANK() OVER (ORDER BY qty DESC, id) AS rk FROM {o} WHERE qty IS NOT NULL",
    "rank_over_aggregate": "SELECT k, total, RANK() OVER (ORDER BY total DESC) AS rk FROM "
    "(SELECT k, SUM(qty) AS total FROM {o} GROUP BY k) g",
    # rows of literals (VALUES, SELECTs without FROM): the same at every snapshot, read
    # whole by the rules that need them, a kept side of an outer join included
    "constant_relations": "SELECT m.label, COUNT(o.id) AS n, SUM(o.qty) AS q FROM "
    "(VALUES ('a', 'first'), ('b', 'second'), (NULL, 'none'), ('z', 'never')) AS m(code, label) "
    "LEFT JOIN {o} o ON o.k = m.code GROUP BY m.label "
    "UNION ALL SELECT 'extra', 0, CAST(NULL AS BIGINT)",
    # ORDER BY ... LIMIT: a ranking of the groups (cat names one group)
    "top_n_groups": "SELECT p.cat, SUM(o.qty) AS q FROM {o} o JOIN {p} p ON o.p = p.p GROUP BY p.cat "
    "ORDER BY q DESC NULLS LAST, cat LIMIT 2 OFFSET 1",
}


@dataclass
class Run:
    modes: list[str] = field(default_factory=list)
    failure: str | None = None


@pytest.fixture(scope="module")
def runs(lh: Lakehouse) -> Iterator[dict[str, Run]]:
    """Every query as a dynamic table over ONE pair of source tables: each step's commits
    are made once and every table is refreshed and checked after it (the tables are
    independent, so each sees exactly the source history it would see alone, at a
    fraction of the commits)."""
    tag = uuid.uuid4().hex[:8]
    o, p = f"o_rules_{tag}", f"p_rules_{tag}"
    dts = {shape: f"dt_{shape}_{tag}" for shape in sorted(QUERIES)}
    out = {shape: Run() for shape in dts}
    lh.sql(SETUP.format(o=o, p=p))

    def attempt(shape: str, when: str, action: Callable[[], None]) -> None:
        if out[shape].failure is None:
            try:
                action()
            except Exception as exc:  # reported by the shape's own test
                out[shape].failure = f"{when}: {type(exc).__name__}: {exc}"

    def create(shape: str) -> None:
        query = QUERIES[shape].format(o=o, p=p)
        attempt(
            shape,
            "CREATE",
            lambda: lh.sql(
                f"CREATE DYNAMIC TABLE {dts[shape]} REFRESH_MODE = INCREMENTAL AS {query}"
            ),
        )
        attempt(shape, "after CREATE", lambda: assert_oracle(lh, dts[shape]))

    def refresh(shape: str, step: int) -> None:
        def run() -> None:
            out[shape].modes.append(
                lh.sql(f"REFRESH DYNAMIC TABLE {dts[shape]}").first().refresh_mode
            )
            assert_oracle(lh, dts[shape])

        attempt(shape, f"step {step}", run)

    # two tables at a time: a refresh of tiny tables is mostly driver-side latency
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(create, dts))
            for i, step in enumerate(STEPS, 1):
                lh.sql(step.format(o=o, p=p))
                list(pool.map(lambda shape, i=i: refresh(shape, i), dts))
        yield out
    finally:
        for dt in dts.values():
            lh.sql(f"DROP DYNAMIC TABLE IF EXISTS {dt}")
        lh.sql(f"DROP TABLE IF EXISTS {o}")
        lh.sql(f"DROP TABLE IF EXISTS {p}")


@pytest.mark.parametrize("shape", sorted(QUERIES))
def test_rule_matches_the_oracle(runs: dict[str, Run], shape: str) -> None:
    run = runs[shape]
    assert run.failure is None, run.failure
    assert set(run.modes) <= {"INCREMENTAL", "NO_DATA"}, run.modes
