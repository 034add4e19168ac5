"""The literals bounding a partition a delta overwrites: day and microsecond numbers, so
years Python's dates cannot hold (10000, -44) are bounded as Spark holds them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from dyntables.refresh.apply import _epoch_day, _Field, _unit_bounds

EPOCH = date(1970, 1, 1)


def _days(d: date) -> int:
    return (d - EPOCH).days


@pytest.mark.parametrize("year", [1, 4, 100, 1582, 1900, 1969, 1970, 2000, 2024, 2100, 9999])
def test_epoch_days_agree_with_pythons_calendar_where_it_has_one(year: int) -> None:
    for month in range(1, 13):
        assert _epoch_day(year, month) == _days(date(year, month, 1))


def test_epoch_days_go_on_past_pythons_calendar() -> None:
    # 400 years of the proleptic Gregorian calendar are 146,097 days
    assert _epoch_day(10000, 1) - _epoch_day(9600, 1) == 146_097
    assert _epoch_day(-44, 3) == _epoch_day(356, 3) - 146_097


@pytest.mark.parametrize("unit", [-30000, -1, 0, 1, 650, 24000])
def test_month_and_year_partitions_of_a_date(unit: int) -> None:
    month = _Field("d", "d", "month", "date")
    first = date(1970 + unit // 12, unit % 12 + 1, 1) if -23000 < unit < 96000 else None
    low, high = _unit_bounds(month, unit)
    if first is not None:
        after = date(first.year + first.month // 12, first.month % 12 + 1, 1)
        assert (low, high) == (
            f"date_from_unix_date({_days(first)})",
            f"date_from_unix_date({_days(after)})",
        )
    year = _Field("d", "d", "year", "date")
    assert _unit_bounds(year, unit)[0] == f"date_from_unix_date({_epoch_day(1970 + unit, 1)})"


def test_partitions_of_a_timestamp_are_instants_in_utc() -> None:
    day = 86_400_000_000
    hours = _Field("ts", "ts", "hour", "timestamp")
    start = datetime(2024, 3, 10, 7, tzinfo=UTC)
    unit = int((start - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(hours=1))
    micros = int(start.timestamp()) * 1_000_000
    assert _unit_bounds(hours, unit) == (
        f"timestamp_micros({micros})",
        f"timestamp_micros({micros + 3_600_000_000})",
    )
    days = _Field("ts", "ts", "day", "timestamp")
    assert _unit_bounds(days, 19000) == (
        f"timestamp_micros({19000 * day})",
        f"timestamp_micros({19001 * day})",
    )
    months = _Field("ts", "ts", "month", "timestamp")
    assert _unit_bounds(months, 12 * 8030) == (
        f"timestamp_micros({_epoch_day(10000, 1) * day})",
        f"timestamp_micros({_epoch_day(10000, 2) * day})",
    )
