"""A dynamic table whose query reads CURRENT_DATE (the seeds' one function of time):
each refresh reads the day once and records it; a refresh on the same day is
incremental, one on another day recomputes and says why."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from dyntables import Lakehouse
from dyntables.catalog.definition import DynamicTableDef, RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.refresh import day as refresh_day
from dyntables.sql.tokens import TableName
from tests.conftest import rows
from tests.oracle import assert_oracle


def _on(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """The clock at noon of ``when`` (YYYY-MM-DD), in whichever time zone it is read."""
    y, m, d = map(int, when.split("-"))
    monkeypatch.setattr(refresh_day, "now", lambda zone: datetime(y, m, d, 12, tzinfo=zone))


def _refresh(lh: Lakehouse, dt: str) -> tuple[str, dict[str, str]]:
    mode = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode
    latest = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1").first()
    return mode, dict(json.loads(latest.stats))


def _as_of(lh: Lakehouse, src: str, day: str) -> list[tuple]:
    """The query on ``day``: the oracle, CURRENT_DATE written as that day."""
    return rows(
        lh.sql(f"SELECT id, amount FROM {src} WHERE d >= date_sub(DATE '{day}', 2) AND amount > 0")
    )


def test_a_query_reading_current_date_equals_its_query_on_each_refreshs_day(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dt = unique("orders"), unique("last_3_days")
    lh.sql(
        f"""
        CREATE TABLE {src} (id INT, d DATE, amount INT);
        INSERT INTO {src} VALUES (1, DATE '2026-11-26', 10), (2, DATE '2026-11-27', 20),
            (3, DATE '2026-11-28', 30), (4, DATE '2026-11-29', 0)
        """
    )
    _on(monkeypatch, "2026-11-29")
    lh.sql(
        f"CREATE DYNAMIC TABLE {dt} REFRESH_MODE = INCREMENTAL AS SELECT id, amount FROM {src} "
        "WHERE d >= date_sub(current_date(), 2) AND amount > 0"
    )
    # an aggregate's state is rebuilt on the new day too (and CURDATE() is the same call)
    daily = unique("daily")
    lh.sql(
        f"CREATE DYNAMIC TABLE {daily} AS SELECT d, COUNT(*) AS n, SUM(amount) AS total "
        f"FROM {src} WHERE d BETWEEN date_sub(curdate(), 2) AND current_date GROUP BY d"
    )
    assert (
        rows(lh.sql(f"SELECT * FROM {dt}")) == _as_of(lh, src, "2026-11-29") == [(2, 20), (3, 30)]
    )

    lh.sql(f"INSERT INTO {src} VALUES (5, DATE '2026-11-29', 50), (6, DATE '2026-11-20', 60)")
    mode, stats = _refresh(lh, dt)
    assert (mode, stats["current_date"], stats[f"rows_read.{src}"]) == (
        "INCREMENTAL",
        "2026-11-29",
        "2",
    )
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == _as_of(lh, src, "2026-11-29")
    assert _refresh(lh, dt)[0] == "NO_DATA"
    assert _refresh(lh, daily)[0] == "INCREMENTAL"
    assert_oracle(lh, daily)

    # the next day: no source changed, yet the rows of the 27th leave the window
    _on(monkeypatch, "2026-11-30")
    mode, stats = _refresh(lh, dt)
    assert (mode, stats["full_reason"], stats["current_date"]) == (
        "FULL",
        "CURRENT_DATE_CHANGED",
        "2026-11-30",
    )
    assert (
        rows(lh.sql(f"SELECT * FROM {dt}")) == _as_of(lh, src, "2026-11-30") == [(3, 30), (5, 50)]
    )
    assert _refresh(lh, dt)[0] == "NO_DATA"
    assert _refresh(lh, daily)[1]["full_reason"] == "CURRENT_DATE_CHANGED"
    assert_oracle(lh, daily)
    lh.sql(f"INSERT INTO {src} VALUES (7, DATE '2026-11-30', 70), (8, DATE '2026-11-28', 8)")
    lh.sql(f"DELETE FROM {src} WHERE id = 3")
    for table in (dt, daily):
        assert _refresh(lh, table)[0] == "INCREMENTAL"
        assert_oracle(lh, table)
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == _as_of(lh, src, "2026-11-30")
    assert rows(lh.sql(f"SELECT * FROM {daily}")) == [
        (datetime(2026, 11, 28).date(), 1, 8),
        (datetime(2026, 11, 29).date(), 2, 50),
        (datetime(2026, 11, 30).date(), 1, 70),
    ]

    # the definition keeps CURRENT_DATE; the refresh state records the day it read
    table = load_table(lh.spark, lh.qualify(TableName((dt,))))
    assert table is not None
    definition = DynamicTableDef.from_properties(table.name, table.properties())
    assert definition is not None and "current_date()" in definition.query
    state = RefreshState.from_properties(table.properties())
    assert state is not None and state.day == "2026-11-30"
    explained = dict(lh.sql(f"EXPLAIN DYNAMIC TABLE {dt}").collect())
    assert explained["decision"] == "INCREMENTAL"
    assert "DATE '2026-11-30'" in explained["current date"]
    assert "CAST('2026-11-30' AS DATE)" in explained["delta sql"]
    # EXPLAIN on the next day says what the next refresh will do
    _on(monkeypatch, "2026-12-01")
    explained = dict(lh.sql(f"EXPLAIN DYNAMIC TABLE {dt}").collect())
    assert explained["decision"] == "FULL"
    assert explained["reason"].startswith("CURRENT_DATE_CHANGED: ")


def test_now_and_current_timestamp_are_still_refused(lh: Lakehouse, unique) -> None:
    """Only the day is read once per refresh: a time of day would change every refresh."""
    from dyntables.errors import NonDeterministicQueryError

    src = unique("src")
    lh.sql(f"CREATE TABLE {src} (id INT, ts TIMESTAMP)")
    for call in ("now()", "current_timestamp()"):
        with pytest.raises(NonDeterministicQueryError):
            lh.sql(f"CREATE DYNAMIC TABLE {unique('nd')} AS SELECT id FROM {src} WHERE ts < {call}")


@pytest.mark.parametrize(
    ("select", "said"),
    [
        # a column named current_date: Spark reads it where the query says current_date
        ("SELECT id, current_date FROM {src}", "also a column's name"),
        ("SELECT current_date FROM (SELECT d AS current_date FROM {src}) AS x", "column's name"),
        # named after the day it reads, unnamed
        ("SELECT id, current_date() FROM {src}", "name it (AS ...)"),
        ("SELECT * FROM (SELECT id, date_sub(current_date(), 1) FROM {src}) AS x", "name it"),
    ],
)
def test_a_current_date_that_could_read_otherwise_is_refused_at_create(
    lh: Lakehouse, unique, select: str, said: str
) -> None:
    from dyntables.errors import UnsupportedQueryError

    src, name = unique("src"), unique("unclear")
    lh.sql(f"CREATE TABLE {src} (id INT, d DATE, current_date DATE)")
    with pytest.raises(UnsupportedQueryError) as err:
        lh.sql(f"CREATE DYNAMIC TABLE {name} AS {select.format(src=src)}")
    assert said in err.value.message and name in err.value.message
    assert lh.sql(f"SHOW TABLES LIKE '{name}'").count() == 0
    # the column, qualified, and the day, called, are what they say
    lh.sql(
        f"CREATE DYNAMIC TABLE {name} AS SELECT s.id, s.current_date AS c, current_date() AS "
        f"today FROM {src} AS s"
    )
