"""The seeds' own examples, replayed: create, insert, refresh, query, mutate, refresh."""

from __future__ import annotations

import json

from dyntables import Lakehouse
from tests.conftest import rows


def _history(lh: Lakehouse, name: str) -> list:
    return lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{name}'").collect()


def test_event_tb_walkthrough(lh: Lakehouse, unique) -> None:
    """Seed 001: event_tb -> event_gettime -> event_group_minute."""
    src, gettime, minute = unique("event_tb"), unique("event_gettime"), unique("event_group_minute")
    lh.sql(
        f"""
        CREATE TABLE {src} ( event STRING, process DOUBLE, event_time TIMESTAMP );
        INSERT INTO {src} VALUES ('event-0', 20.0, TIMESTAMP '2023-09-20 14:43:13'),
          ('event-0', 20.0, TIMESTAMP '2023-09-19 11:40:13'), ('event-1', 21.0, TIMESTAMP '2023-09-19 14:30:14'),
          ('event-1', 22.0, TIMESTAMP '2023-09-20 14:20:15');
        CREATE dynamic TABLE IF NOT EXISTS {gettime} AS SELECT event, process, YEAR(event_time) event_year,
          MONTH(event_time) event_month, DAY(event_time) event_day, hour(event_time) event_hour,
          minute(event_time) event_minute FROM {src};
        REFRESH dynamic TABLE {gettime};
        CREATE dynamic TABLE IF NOT EXISTS {minute} AS SELECT event, event_hour, event_minute,
          SUM(process) process_sum FROM {gettime} GROUP BY event, event_hour, event_minute;
        refresh dynamic table {minute};
        """
    )
    assert lh.sql(f"SELECT count(*) FROM {gettime}").first()[0] == 4
    lh.sql(f"INSERT INTO {src} VALUES ('event-0', 20.0, TIMESTAMP '2024-01-20 14:43:13')")
    refreshed = lh.sql(f"REFRESH DYNAMIC TABLE {gettime}").first()
    assert (refreshed.state, refreshed.refresh_mode, refreshed.rows_inserted) == (
        "SUCCEED",
        "INCREMENTAL",
        1,
    )

    latest = _history(lh, gettime)[0]
    assert latest.state == "SUCCEED"
    assert latest.refresh_mode == "INCREMENTAL"
    assert latest.refresh_trigger == "MANUAL"
    assert json.loads(latest.stats)["rows_inserted"] == "1"
    assert json.loads(latest.stats)["rows_deleted"] == "0"
    assert json.loads(latest.source_tables) == [
        {"schema": "public", "table_name": src, "workspace": lh.catalog}
    ]

    lh.sql(f"REFRESH DYNAMIC TABLE {minute}")
    assert rows(lh.sql(f"SELECT * FROM {minute} WHERE event = 'event-0'")) == [
        ("event-0", 11, 40, 20.0),
        ("event-0", 14, 43, 40.0),
    ]


def test_dws_category_sales_quick_example(lh: Lakehouse, unique) -> None:
    """Seed 003: the printed result Electronics 2/5, Clothing 1/5."""
    orders, products, dws = (
        unique("ods_orders"),
        unique("ods_products"),
        unique("dws_category_sales"),
    )
    lh.sql(
        f"""
        CREATE TABLE IF NOT EXISTS {orders} ( order_id BIGINT, product_id BIGINT, quantity INT, created_at TIMESTAMP );
        CREATE TABLE IF NOT EXISTS {products} ( product_id BIGINT, category STRING );
        INSERT INTO {products} VALUES (1, 'Electronics'), (2, 'Clothing');
        INSERT INTO {orders} VALUES (1, 1, 2, TIMESTAMP '2024-05-01 10:00:00'), (2, 1, 3, TIMESTAMP '2024-05-01 11:00:00'),
          (3, 2, 5, TIMESTAMP '2024-05-01 12:00:00');
        CREATE DYNAMIC TABLE {dws} REFRESH INTERVAL 10 MINUTE VCLUSTER default AS
          SELECT p.category, COUNT(*) AS order_cnt, SUM(o.quantity) AS total_quantity
          FROM {orders} o JOIN {products} p ON o.product_id = p.product_id GROUP BY p.category;
        REFRESH DYNAMIC TABLE {dws};
        """
    )
    assert rows(lh.sql(f"SELECT * FROM {dws}")) == [("Clothing", 1, 5), ("Electronics", 2, 5)]
    # no source changed since the build: NO_DATA, no new snapshot of the table
    before = lh.sql(f"SELECT count(*) FROM public.{dws}.snapshots").first()[0]
    again = lh.sql(f"REFRESH DYNAMIC TABLE {dws}").first()
    assert again.refresh_mode == "NO_DATA"
    assert lh.sql(f"SELECT count(*) FROM public.{dws}.snapshots").first()[0] == before
    history = _history(lh, dws)
    assert [h.refresh_mode for h in history[:3]] == ["NO_DATA", "NO_DATA", "FULL"]
    assert (
        history[-1].refresh_mode == "FULL"
        and json.loads(history[-1].stats)["full_reason"] == "INITIAL_BUILD"
    )
