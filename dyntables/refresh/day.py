"""The day a refresh reads CURRENT_DATE as (see query.on_day).

A refresh reads the day once, in the time zone its query computes in (the one CREATE
recorded, else the session's), as Spark's own current_date() would; every statement of
the refresh then reads the same day, even one that runs past midnight.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dyntables.catalog.definition import DynamicTableDef
from dyntables.errors import UnsupportedQueryError
from dyntables.plan.query import on_day, reads_current_date

TIME_ZONE = "spark.sql.session.timeZone"
# why a refresh recomputes: the query reads CURRENT_DATE, another day than the last
# refresh's (a stable reason code, in the history and EXPLAIN)
DAY_CHANGED = "CURRENT_DATE_CHANGED"
# Spark's zone offsets: +08:00, -0530, UTC+8, GMT-03:00
_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?", re.IGNORECASE)


def today(spark: Any, dt: DynamicTableDef) -> str | None:
    """The day (YYYY-MM-DD) ``dt``'s query reads as CURRENT_DATE now; None when it
    reads none."""
    if not reads_current_date(dt.query):
        return None
    name = dt.settings.get(TIME_ZONE) or str(spark.conf.get(TIME_ZONE))
    return now(_zone(name, dt)).date().isoformat()


def now(zone: tzinfo) -> datetime:
    """The clock (a test sets another day)."""
    return datetime.now(zone)


def dated(dt: DynamicTableDef, day: str | None) -> DynamicTableDef:
    """``dt`` with its query reading CURRENT_DATE as ``day`` (itself for None). Never
    stored: the definition keeps CURRENT_DATE."""
    return dt if day is None else replace(dt, query=on_day(dt.query, day))


def _zone(name: str, dt: DynamicTableDef) -> tzinfo:
    if name.upper() in ("UTC", "Z", "GMT", "UT"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    m = _OFFSET.fullmatch(name)
    if m is None:
        raise UnsupportedQueryError(
            f"dynamic table {dt.name} reads CURRENT_DATE in the time zone {name}, which "
            "dyntables cannot read; set spark.sql.session.timeZone to a region "
            "(Europe/Paris) or an offset (+01:00) and create it again"
        )
    sign = -1 if m.group(1) == "-" else 1
    return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0)))
