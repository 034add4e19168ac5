"""The day a refresh reads CURRENT_DATE as: pure (a fake session's settings)."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

import pytest

from dyntables.catalog.definition import DynamicTableDef
from dyntables.errors import UnsupportedQueryError
from dyntables.refresh import day
from dyntables.sql.tokens import TableName


class _Conf:
    def __init__(self, zone: str) -> None:
        self.zone = zone

    def get(self, key: str) -> str:
        assert key == day.TIME_ZONE
        return self.zone


class _Session:
    def __init__(self, zone: str) -> None:
        self.conf = _Conf(zone)


def _dt(query: str, settings: dict[str, str] | None = None) -> DynamicTableDef:
    return DynamicTableDef(TableName(("c", "n", "t")), "id", query, (), settings=settings or {})


# 2026-11-29 23:30 UTC: already the 30th east of it, still the 29th west of it
INSTANT = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("UTC", "2026-11-29"),
        ("Asia/Shanghai", "2026-11-30"),
        ("America/New_York", "2026-11-29"),
        ("+08:00", "2026-11-30"),
        ("GMT-3", "2026-11-29"),
        ("UTC+01:00", "2026-11-30"),
    ],
)
def test_the_day_is_read_in_the_zone_the_query_computes_in(
    monkeypatch: pytest.MonkeyPatch, zone: str, expected: str
) -> None:
    monkeypatch.setattr(day, "now", lambda z: INSTANT.astimezone(z))
    assert day.today(_Session(zone), _dt("SELECT current_date()")) == expected
    # the zone CREATE recorded wins over the refreshing session's
    recorded = _dt("SELECT current_date()", {day.TIME_ZONE: zone})
    assert day.today(_Session("Pacific/Kiritimati"), recorded) == expected


def test_a_query_without_current_date_has_no_day_and_is_not_rewritten() -> None:
    dt = _dt("SELECT `current_date`, t.current_date, 'current_date()' AS current_date FROM t")
    assert day.today(_Session("no such zone"), dt) is None
    assert day.dated(dt, None) is dt


def test_a_dated_query_reads_the_day_as_a_literal() -> None:
    dt = _dt("SELECT id FROM t WHERE d >= date_sub(current_date(), 7) OR d = CURDATE()")
    assert day.dated(dt, "2026-11-29").query == (
        "SELECT id FROM t WHERE d >= date_sub(DATE '2026-11-29', 7) OR d = DATE '2026-11-29'"
    )


def test_a_zone_it_cannot_read_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedQueryError) as err:
        day.today(_Session("Mars/Olympus"), _dt("SELECT current_date"))
    assert "c.n.t" in err.value.message and "spark.sql.session.timeZone" in err.value.message


def test_a_region_zone_is_read_without_the_systems_zone_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pinned tzdata package stands in where the system has no zone database."""
    monkeypatch.setattr(day, "now", lambda z: INSTANT.astimezone(z))
    zoneinfo.reset_tzpath(to=[])
    zoneinfo.ZoneInfo.clear_cache()
    try:
        assert day.today(_Session("Asia/Shanghai"), _dt("SELECT current_date")) == "2026-11-30"
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()
