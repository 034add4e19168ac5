"""``dyntables scheduler``: the loop as a foreground service with a stdout log.

SIGINT/SIGTERM ask the loop to stop: no new refresh starts, the ones in flight finish
(each commits whole or not at all), then the command exits 0. A second signal stops at
once (exit 130); an abandoned refresh has committed nothing.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from dyntables.scheduler.events import INFO, NoDataFolded, SchedulerEvent, format_event
from dyntables.scheduler.loop import Scheduler, SchedulerConfig

if TYPE_CHECKING:
    from dyntables.lakehouse import Lakehouse


def serve(
    lh: Lakehouse,
    config: SchedulerConfig,
    out: TextIO | None = None,
    once: bool = False,
    verbose: bool = False,
) -> int:
    """Run until a signal (or one cycle with ``once``); returns the exit code: 1 when a
    refresh of the one cycle failed, else 0. Plain NO_DATA refreshes are summed up once
    a minute unless ``verbose``."""
    stream = out or sys.stdout

    def write(event: SchedulerEvent) -> None:
        print(format_event(event), file=stream, flush=True)

    folded = NoDataFolded(write)
    scheduler = Scheduler(lh.commands.registry, config, listeners=[write if verbose else folded])
    scope = (
        "tables " + ", ".join(config.tables)
        if config.tables
        else "namespaces " + ", ".join(config.namespaces)
        if config.namespaces
        else "every namespace"
    )
    mode = "one cycle" if once else "until SIGINT/SIGTERM"
    write(
        SchedulerEvent(
            INFO,
            scheduler.clock(),
            message=f"scheduler started: catalog {lh.catalog}, {scope}, {config.workers} workers, "
            f"tick {config.tick:g}s, suspend after {config.policy.max_failures} failures; runs {mode}",
        )
    )
    if once:
        scheduler.run_cycle()
    else:
        with _stop_on_signals(scheduler):
            scheduler.run()
    folded.flush(scheduler.clock())
    s = scheduler.stats
    write(
        SchedulerEvent(
            INFO,
            scheduler.clock(),
            message=f"scheduler stopped: {s.refreshes} refreshes ({s.no_data} NO_DATA), {s.failures} failed, "
            f"{s.skips} skipped, {s.suspensions} suspended",
        )
    )
    # one cycle (cron's way to run it): non-zero when a refresh failed, so cron says so
    return 1 if once and s.failures else 0


@contextmanager
def _stop_on_signals(scheduler: Scheduler) -> Iterator[None]:
    """First SIGINT/SIGTERM: graceful stop. Second: KeyboardInterrupt (immediate)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals can only be handled on the main thread; the caller stops us
        return
    asked = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal asked
        if asked:
            raise KeyboardInterrupt
        asked = True
        name = signal.Signals(signum).name
        print(
            format_event(
                SchedulerEvent(
                    INFO,
                    scheduler.clock(),
                    message=f"{name}: stopping after the refreshes in flight (again to stop at once)",
                )
            ),
            flush=True,
        )
        scheduler.request_stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
