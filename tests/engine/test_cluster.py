"""The same code on a cluster: a Spark master with executors in JVMs of their own.

Spark's ``local-cluster`` master starts a standalone master, a worker and executor
processes on this machine, so tasks run outside the driver: the Iceberg jar reaches the
executors through ``spark.jars``, a refresh's cached and checkpointed intermediate
results live in the executors' block managers, and nothing the refresh computes passes
through the driver. It needs its own SparkContext, so it runs in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dyntables

REPO = Path(dyntables.__file__).resolve().parents[1]

# The seeds' join and aggregate layers over a merge-on-read source (delete files), with
# a DOUBLE sum (its change is checkpointed) and a MAX, and a
# deduplication (a partitioned window), refreshed after an insert and after a MERGE that
# updates and deletes.
SCRIPT = r"""
import sys, time
from dyntables import Lakehouse
from tests.oracle import assert_oracle

conf = {"spark.master": "local-cluster[2,1,1024]", "spark.executor.memory": "512m"}
with Lakehouse(warehouse=sys.argv[1], conf=conf) as lh:
    lh.sql('''
    CREATE TABLE orders (order_id BIGINT, product_id BIGINT, qty INT, price DOUBLE,
      status STRING, ts TIMESTAMP)
      TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read',
      'write.merge.mode'='merge-on-read');
    CREATE TABLE products (product_id BIGINT, category STRING);
    INSERT INTO products SELECT id, concat('cat-', id % 4) FROM range(12);
    INSERT INTO orders SELECT id, id % 12, CAST(1 + id % 3 AS INT), (id % 97) / 4.0,
      CASE WHEN id % 11 = 0 THEN 'cancelled' ELSE 'paid' END,
      TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, id % 48, 0, 0) FROM range(600);
    CREATE DYNAMIC TABLE dwd PARTITIONED BY (days(ts)) REFRESH_MODE = INCREMENTAL AS
      SELECT o.order_id, o.product_id, o.ts, o.qty * o.price AS amount, p.category
      FROM orders o JOIN products p ON o.product_id = p.product_id WHERE o.status <> 'cancelled';
    CREATE DYNAMIC TABLE dws REFRESH_MODE = INCREMENTAL AS
      SELECT category, date_trunc('HOUR', ts) AS h, COUNT(*) AS n, SUM(amount) AS gmv,
        MAX(amount) AS top
      FROM dwd GROUP BY category, date_trunc('HOUR', ts);
    CREATE DYNAMIC TABLE latest REFRESH_MODE = INCREMENTAL AS SELECT * FROM (
      SELECT order_id, product_id, price,
        ROW_NUMBER() OVER (PARTITION BY product_id ORDER BY order_id DESC) AS rn
      FROM orders) WHERE rn = 1
    ''')
    tables = ("dwd", "dws", "latest")
    steps = [
        "INSERT INTO orders SELECT id, id % 12, 2, 5.25, 'paid', TIMESTAMP'2024-01-02 03:00:00' "
        "FROM range(600, 650)",
        "MERGE INTO orders t USING (SELECT id AS order_id FROM range(0, 650, 13)) s "
        "ON t.order_id = s.order_id WHEN MATCHED AND t.order_id % 2 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET price = price + 1, status = 'cancelled'",
    ]
    modes = []
    for step in steps:
        lh.sql(step)
        for name in tables:
            modes.append(lh.sql(f"REFRESH DYNAMIC TABLE {name}").first().refresh_mode)
            assert_oracle(lh, name)
    executors = lh.spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print(f"executors={executors} modes={','.join(modes)}")
"""


# a minute of its own (three JVMs on two cores): run by CI after `make test` (.ci/run)
@pytest.mark.slow
def test_the_seeds_layers_refresh_incrementally_and_exactly_on_executors_of_their_own(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "warehouse")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("executors=")]
    executors, modes = (part.split("=", 1)[1] for part in line.split())
    assert int(executors) == 2
    assert modes.split(",") == ["INCREMENTAL"] * 6
