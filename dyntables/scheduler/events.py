"""What the scheduler reports, and the one-line-per-refresh log format.

Listeners (the CLI's stdout log, the demo's live view, tests) receive
:class:`SchedulerEvent` objects on the scheduler's own thread; they must be quick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from dyntables.refresh.history import NO_DATA

# event kinds
REFRESHED = "refresh"  # a refresh succeeded (INCREMENTAL, FULL or NO_DATA)
FAILED = "failed"  # a refresh failed (recorded FAILED in history by the runner)
SKIPPED = "skipped"  # not run this cycle: an upstream failed or is busy elsewhere
BUSY = "busy"  # a refresh outside this scheduler holds this table's refresh lease
BACKLOG = "backlog"  # the refresh takes longer than the interval
SUSPENDED = "suspended"  # suspended after too many consecutive failures
# a refresh committed, then its table's maintenance (snapshot expiry, compaction)
# failed: the refresh stands, but snapshots or small files pile up until one succeeds
MAINTENANCE = "maintenance"
ERROR = "error"  # the scheduler itself could not plan (e.g. catalog unreachable)
INFO = "info"  # service start/stop lines


@dataclass(frozen=True)
class SchedulerEvent:
    kind: str
    time: float  # epoch seconds when it happened (end of the refresh)
    name: str = ""
    mode: str | None = None
    rows_inserted: int = 0
    rows_deleted: int = 0
    started: float | None = None
    duration_s: float | None = None
    interval_s: float | None = None
    # data lag right after the refresh: time since the oldest base-table commit the
    # table may not reflect (Snowflake's "lag"; end-to-end through upstream DTs)
    lag_s: float | None = None
    as_of: float | None = None
    reason: str | None = None  # why it ran: "due" / "upstream refreshes"
    message: str | None = None
    job_id: str | None = None

    @property
    def ended(self) -> float:
        return self.time


Listener = Callable[[SchedulerEvent], None]


def timestamp(epoch: float) -> str:
    """UTC, like the history table and the session time zone."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def format_event(event: SchedulerEvent) -> str:
    """One line: time, what, table, then details. Meant for humans and grep."""
    head = f"{timestamp(event.time)} {event.kind.upper():<9} {event.name}"
    if event.kind == REFRESHED:
        rows = f"+{event.rows_inserted}/-{event.rows_deleted} rows"
        lag = "lag -" if event.lag_s is None else f"lag {event.lag_s:.2f}s"
        line = f"{head}  {event.mode or '-'}  {rows}  {event.duration_s or 0.0:.2f}s  {lag}"
        # why FULL, or why nothing was read (a source dropped, renamed, ...)
        return f"{line}  ({event.message})" if event.message else line
    if event.kind == INFO:
        return f"{timestamp(event.time)} {event.message}"
    detail = event.message or ""
    if event.kind == FAILED and event.duration_s is not None:
        detail = f"after {event.duration_s:.2f}s: {detail}"
    return f"{head}  {detail}".rstrip()


def line_logger(write: Callable[[str], None]) -> Listener:
    """A listener that formats every event and hands the line to ``write``."""

    def listen(event: SchedulerEvent) -> None:
        write(format_event(event))

    return listen


class NoDataFolded:
    """A listener in front of another: plain NO_DATA refreshes (nothing new, nothing to
    say) are counted rather than passed on, and at most once per ``every`` seconds one
    INFO line says how many there were. Three 1-second tables over quiet sources wrote
    three lines a second. A NO_DATA with a note (a source dropped) still passes."""

    def __init__(self, inner: Listener, every: float = 60.0) -> None:
        self._inner, self._every = inner, every
        self._count, self._names, self._since = 0, set[str](), 0.0

    def __call__(self, event: SchedulerEvent) -> None:
        if event.kind != REFRESHED or event.mode != NO_DATA or event.message:
            if self._count and event.time - self._since >= self._every:
                self.flush(event.time)  # not held back by tables that had work
            self._inner(event)
            return
        if not self._count:
            self._since = event.time
        self._count += 1
        self._names.add(event.name)
        if event.time - self._since >= self._every:
            self.flush(event.time)

    def flush(self, now: float) -> None:
        """Say what was counted (the service calls this before its last line)."""
        if not self._count:
            return
        refreshes = "refresh" if self._count == 1 else "refreshes"
        tables = "table" if len(self._names) == 1 else "tables"
        self._inner(
            SchedulerEvent(
                INFO,
                now,
                message=f"{self._count} NO_DATA {refreshes} of {len(self._names)} {tables} "
                f"in {max(0.0, now - self._since):.0f}s: nothing new in their sources",
            )
        )
        self._count, self._names = 0, set()


def logging_listener(logger: logging.Logger | None = None) -> Listener:
    """The default for a background scheduler: lines go to ``logging`` (quiet in a
    notebook unless the user configures logging), warnings for failures and backlog."""
    log = logger or logging.getLogger("dyntables.scheduler")

    def listen(event: SchedulerEvent) -> None:
        level = logging.INFO
        if event.kind == REFRESHED and event.mode == NO_DATA and not event.message:
            level = logging.DEBUG  # a quiet pipeline refreshes often and finds nothing
        elif event.kind in (FAILED, BACKLOG, SKIPPED, MAINTENANCE):
            level = logging.WARNING
        elif event.kind in (SUSPENDED, ERROR):
            level = logging.ERROR
        log.log(level, format_event(event))

    return listen
