"""``dyntables demo`` end to end, and every walk-through in ``examples/`` against the
figures its seed prints. All on the shared Spark session, each in a namespace of its own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from dyntables import Lakehouse
from dyntables.demo import LAYERS, TOP, Standing, run_demo
from tests.conftest import rows

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def session(lh: Lakehouse, unique: Callable[[str], str]) -> Iterator[Lakehouse]:
    """A Lakehouse on a session of its own whose current namespace is fresh, so the
    examples' unqualified names (ods_orders, ...) never meet another test's tables."""
    own = Lakehouse(spark=lh.spark.newSession(), catalog=lh.catalog, namespace=unique("examples"))
    yield own
    own.close()


def _script(name: str) -> str:
    return (EXAMPLES / name).read_text(encoding="utf-8")


def _first(board: list[Standing]) -> tuple[str, Decimal]:
    return board[0].category, board[0].gmv


def test_demo_reproduces_the_seed_and_refreshes_itself_incrementally(
    lh: Lakehouse, unique: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = unique("sales_demo")
    report = run_demo(lh, duration=15, live=False, namespace=namespace)
    out = capsys.readouterr().out

    assert report.ok, report.checks
    # after the initial orders: Sports & Outdoors 1570 from 4 orders, average 196.25
    assert _first(report.initial) == ("Sports & Outdoors", Decimal("1570"))
    sports = report.initial[0]
    assert (sports.order_cnt, sports.total_quantity, sports.avg_price) == (4, 8, Decimal("196.25"))
    assert report.sports_orders_by_product == {"Running Shoes": 2, "Yoga Mat": 1, "Jump Rope": 1}
    electronics = next(s for s in report.initial if s.category == "Electronics")
    assert (electronics.rank, electronics.gmv) == (2, Decimal("1155"))
    # after the second batch, refreshed by the scheduler: Electronics 1841 (+686), first
    assert _first(report.after_second_batch) == ("Electronics", Decimal("1841"))
    assert [(s.rank, s.category) for s in report.after_second_batch][:2] == [
        (1, "Electronics"),
        (2, "Sports & Outdoors"),
    ]
    assert report.second_batch_latency is not None and report.second_batch_latency > 0

    # after the build at CREATE, the join and the aggregate refreshed incrementally on
    # their own; the leaderboard re-ranks all categories, which AUTO recomputes (FULL)
    for _, table in LAYERS:
        modes = report.scheduled_modes.get(table, {})
        done, other = ("FULL", "INCREMENTAL") if table == TOP else ("INCREMENTAL", "FULL")
        assert modes.get(done, 0) >= 1, (table, modes)
        assert other not in modes, (table, modes)
    assert report.batches >= 1 and report.latencies

    for step in ("== 1/5", "== 2/5", "== 3/5", "== 4/5", "== 5/5"):
        assert step in out
    assert "MISMATCH" not in out
    assert "end-to-end latency (order commit -> leaderboard)" in out

    # the dashboard's two remaining walk-through files run in the demo's namespace
    own = Lakehouse(spark=lh.spark.newSession(), catalog=lh.catalog, namespace=namespace)
    try:
        history = own.sql(_script("sales_dashboard/05_refresh_history.sql")).collect()
        assert {r.name for r in history} == {t for _, t in LAYERS}
        assert "INCREMENTAL" in {r.refresh_mode for r in history}
        own.sql(_script("sales_dashboard/06_clean_up.sql"))
        tables = {r.tableName for r in own.sql(f"SHOW TABLES IN {namespace}").collect()}
        assert not tables & {"ods_orders", "ods_products", *(t for _, t in LAYERS)}
    finally:
        own.close()


def test_event_tb_walkthrough(session: Lakehouse) -> None:
    """Seed 001: one new row, refreshed INCREMENTAL with rows_inserted 1, as printed."""
    latest = session.sql(_script("event_tb.sql")).collect()[0]
    assert (latest.name, latest.state, latest.refresh_trigger, latest.refresh_mode) == (
        "event_gettime",
        "SUCCEED",
        "MANUAL",
        "INCREMENTAL",
    )
    stats = json.loads(latest.stats)
    assert (stats["rows_inserted"], stats["rows_deleted"]) == ("1", "0")
    assert json.loads(latest.source_tables) == [
        {"schema": session.namespace, "table_name": "event_tb", "workspace": session.catalog}
    ]
    assert rows(session.sql("SELECT * FROM event_group_minute WHERE event = 'event-0'")) == [
        ("event-0", 11, 40, 20.0),
        ("event-0", 14, 43, 40.0),
    ]
    interval = session.commands.registry.get(session.qualify("event_gettime")).interval_seconds
    assert interval == 60


def test_dws_category_sales_quick_example(session: Lakehouse) -> None:
    """Seed 002's printed result: Electronics 2 orders 5 units, Clothing 1 order 5 units."""
    result = session.sql(_script("dws_category_sales.sql"))
    assert [tuple(r) for r in result.collect()] == [("Electronics", 2, 5), ("Clothing", 1, 5)]
    dt = session.commands.registry.get(session.qualify("dws_category_sales"))
    assert dt.interval_seconds == 30 * 60  # CREATE OR REPLACE changed only the interval
    assert dt.retention_days == 7


def test_clickstream_tutorial(session: Lakehouse) -> None:
    """Seed 000: a raw log, a cleaning DT, an aggregation DT, refreshed incrementally."""
    result = session.sql(_script("clickstream.sql"))
    assert [tuple(r)[1:] for r in result.collect()] == [
        (9, "Books", 5, 3, 1, 1),
        (9, "Electronics", 1, 0, 0, 0),
        (10, "Books", 1, 1, 0, 0),
        (10, "Electronics", 2, 1, 0, 1),
    ]
    assert session.sql("SELECT count(*) FROM dwd_user_behavior").first()[0] == 9
    history = session.sql(
        f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE schema_name = '{session.namespace}' LIMIT 2"
    ).collect()
    assert [(r.name, r.refresh_mode) for r in history] == [
        ("dws_behavior_hourly", "INCREMENTAL"),
        ("dwd_user_behavior", "INCREMENTAL"),
    ]


def test_every_example_file_is_covered() -> None:
    covered = {"event_tb.sql", "dws_category_sales.sql", "clickstream.sql"}
    found = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.sql")}
    dashboard = {f for f in found if f.startswith("sales_dashboard/")}
    assert found - dashboard == covered
    assert dashboard == {
        "sales_dashboard/01_sources.sql",
        "sales_dashboard/02_initial_orders.sql",
        "sales_dashboard/03_dynamic_tables.sql",
        "sales_dashboard/04_second_batch.sql",
        "sales_dashboard/05_refresh_history.sql",
        "sales_dashboard/06_clean_up.sql",
    }
