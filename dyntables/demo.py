"""Placeholder for ``dyntables demo`` until the real pipeline demo lands.

It proves the plumbing end to end (Spark starts, Iceberg writes, results render) with
one small table. ``duration``, ``live`` and ``interval`` are accepted so the CLI's
interface is final already; this placeholder does not use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dyntables.cli.render import render_table, row_count_line

if TYPE_CHECKING:
    from dyntables.lakehouse import Lakehouse

DEMO_TABLE = "demo_orders"


def run_demo(
    lh: Lakehouse, duration: float | None = None, live: bool = True, interval: float = 1.0
) -> None:
    lh.sql(
        f"CREATE OR REPLACE TABLE {DEMO_TABLE} "
        "(order_id INT, customer STRING, amount DECIMAL(10, 2)) USING iceberg"
    )
    lh.sql(
        f"INSERT INTO {DEMO_TABLE} VALUES "
        "(1, 'alice', 12.50), (2, 'bob', 8.00), (3, 'alice', 4.25), (4, 'carol', 20.00)"
    )
    result = lh.sql(
        f"SELECT customer, COUNT(*) AS orders, SUM(amount) AS total "
        f"FROM {DEMO_TABLE} GROUP BY customer ORDER BY total DESC"
    )
    rows = result.collect()
    print(f"{DEMO_TABLE}: totals per customer")
    print(render_table(result.columns, rows))
    print(row_count_line(len(rows), truncated=False))
