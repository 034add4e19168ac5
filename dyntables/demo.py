"""``dyntables demo`` (``make demo``): the seeds' real-time sales dashboard, live.

What it shows, in five steps:

1. the e-commerce source tables and the seed's initial orders;
2. three layers of dynamic tables refreshing every second (DWD join + filter, ADS
   aggregate, ADS leaderboard with RANK()), checked against the seed's figures:
   Sports & Outdoors first with GMV 1570 from 4 orders, average price 196.25;
3. the scheduler, in-process, and the seed's second batch of orders: the pipeline
   refreshes itself and Electronics rises from 1155 to 1841 (+686) to first place;
4. a writer thread that keeps sending orders (the seed's Step01 import task) while
   the terminal shows the leaderboard and each layer's latest refresh, live;
5. the refresh history of the three layers (INCREMENTAL refreshes, NO_DATA skips; the
   leaderboard re-ranks all categories, which AUTO recomputes: FULL, WINDOW_OVER_ALL_ROWS)
   and the end-to-end latency observed, from an order's commit to the leaderboard.

The SQL is not in this module: it is read from ``examples/sales_dashboard/*.sql``, the
same files a user runs with ``dyntables sql -f``. Everything lives in its own namespace
(``sales_demo``) of the catalog, on a session of its own, and is dropped and recreated
at each run, so reruns start from the seed's data.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from dyntables.catalog.iceberg import load_table
from dyntables.cli.render import render_table
from dyntables.errors import DynTablesError
from dyntables.scheduler import events as ev

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from dyntables.lakehouse import Lakehouse
    from dyntables.scheduler import Scheduler

DEMO_NAMESPACE = "sales_demo"
SCRIPTS_DIR = "sales_dashboard"
SOURCES, INITIAL_ORDERS, DYNAMIC_TABLES, SECOND_BATCH = (
    "01_sources.sql",
    "02_initial_orders.sql",
    "03_dynamic_tables.sql",
    "04_second_batch.sql",
)
# layer label -> dynamic table, upstream first
LAYERS: tuple[tuple[str, str], ...] = (
    ("DWD", "dwd_orders_enriched"),
    ("ADS", "ads_category_gmv"),
    ("ADS rank", "ads_category_rank"),
)
TOP = LAYERS[-1][1]
PIPELINE_TIMEOUT = 300.0  # seconds to wait for the pipeline to reflect a batch
STOP_TIMEOUT = 120.0  # seconds to wait for refreshes in flight at the end


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """One row of the leaderboard."""

    rank: int
    category: str
    gmv: Decimal
    order_cnt: int
    total_quantity: int
    avg_price: Decimal


@dataclass
class DemoReport:
    """What the demo saw; the test checks it, the CLI prints it."""

    namespace: str
    initial: list[Standing] = field(default_factory=list)
    after_second_batch: list[Standing] = field(default_factory=list)
    sports_orders_by_product: dict[str, int] = field(default_factory=dict)
    checks: list[tuple[str, bool]] = field(default_factory=list)
    # table -> refresh_mode -> count, for the scheduler's successful refreshes
    scheduled_modes: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0
    orders: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, commit -> leaderboard
    second_batch_latency: float | None = None

    @property
    def ok(self) -> bool:
        return all(passed for _, passed in self.checks)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    index = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[min(index, len(ordered) - 1)]


# -- the SQL files ---------------------------------------------------------------------------


def examples_dir() -> Path:
    """``examples/`` of the repository (``make demo`` runs from a checkout), or
    ``$DYNTABLES_EXAMPLES``."""
    override = os.environ.get("DYNTABLES_EXAMPLES")
    path = Path(override) if override else Path(__file__).resolve().parents[1] / "examples"
    if not (path / SCRIPTS_DIR).is_dir():
        raise DynTablesError(
            f"the demo's SQL files are not in {path / SCRIPTS_DIR}; run the demo from a checkout of "
            "the repository (make demo) or point DYNTABLES_EXAMPLES at its examples folder"
        )
    return path


def read_script(name: str, interval_seconds: int = 1) -> str:
    """One of the dashboard's SQL files; ``interval_seconds`` replaces the 1-second interval."""
    text = (examples_dir() / SCRIPTS_DIR / name).read_text(encoding="utf-8")
    if interval_seconds != 1:
        text = text.replace(
            "REFRESH INTERVAL 1 SECOND", f"REFRESH INTERVAL {interval_seconds} SECOND"
        )
    return text


def leaderboard(lh: Lakehouse) -> list[Standing]:
    rows = lh.sql(
        f"SELECT gmv_rank, category, gmv, order_cnt, total_quantity, avg_price FROM {TOP} "
        "ORDER BY gmv_rank, category"
    ).collect()
    return [
        Standing(int(r[0]), str(r[1]), Decimal(r[2]), int(r[3]), int(r[4]), Decimal(r[5]))
        for r in rows
    ]


def orders_by_product(lh: Lakehouse, category: str) -> dict[str, int]:
    rows = lh.sql(
        "SELECT product_name, COUNT(*) FROM dwd_orders_enriched "
        f"WHERE category = '{category}' GROUP BY product_name"
    ).collect()
    return {str(r[0]): int(r[1]) for r in rows}


def _row_counts(stats: str | None) -> tuple[str, str]:
    values = json.loads(stats) if stats else {}
    return str(values.get("rows_inserted", "")), str(values.get("rows_deleted", ""))


def _counter(rows: Sequence[Any]) -> Callable[[str | None, str], int]:
    """count(mode, state) over grouped history rows (name, trigger, mode, state, n, ...)."""

    def count(mode: str | None, state: str) -> int:
        return sum(int(r[4]) for r in rows if r[3] == state and (mode is None or r[2] == mode))

    return count


def _standing(board: Sequence[Standing], category: str) -> Standing | None:
    return next((s for s in board if s.category == category), None)


# -- the seed's figures ------------------------------------------------------------------------


def initial_checks(board: Sequence[Standing], products: dict[str, int]) -> list[tuple[str, bool]]:
    sports = _standing(board, "Sports & Outdoors")
    electronics = _standing(board, "Electronics")
    return [
        ("Sports & Outdoors ranks first", bool(board) and board[0].category == "Sports & Outdoors"),
        ("its GMV is 1570", sports is not None and sports.gmv == Decimal("1570")),
        ("from 4 orders", sports is not None and sports.order_cnt == 4),
        (
            "running shoes 2 orders, yoga mat 1, jump rope 1",
            products == {"Running Shoes": 2, "Yoga Mat": 1, "Jump Rope": 1},
        ),
        ("average price 196.25", sports is not None and sports.avg_price == Decimal("196.25")),
        ("Electronics has 1155", electronics is not None and electronics.gmv == Decimal("1155")),
    ]


def second_batch_checks(
    before: Sequence[Standing], after: Sequence[Standing]
) -> list[tuple[str, bool]]:
    old = _standing(before, "Electronics")
    new = _standing(after, "Electronics")
    sports = _standing(after, "Sports & Outdoors")
    return [
        (
            "Electronics rises from 1155 to 1841",
            old is not None
            and new is not None
            and (old.gmv, new.gmv) == (Decimal("1155"), Decimal("1841")),
        ),
        (
            "+686 new GMV",
            old is not None and new is not None and new.gmv - old.gmv == Decimal("686"),
        ),
        (
            "Electronics takes first place",
            bool(after) and after[0].category == "Electronics" and after[0].rank == 1,
        ),
        (
            "Sports & Outdoors stays at 1570, now second",
            sports is not None and sports.gmv == Decimal("1570") and sports.rank == 2,
        ),
    ]


# -- the order stream --------------------------------------------------------------------------


@dataclass(frozen=True)
class Product:
    product_id: int
    category: str
    unit_price: Decimal


class OrderWriter(threading.Thread):
    """Sends a small batch of random orders every ``every`` seconds (the seeds' Step01
    import task), at a fixed rate: a slow INSERT delays the next batch, never the pace
    after it. Now and then a category runs a promotion and sells three times more, so
    the leaderboard has something to show. ``statuses``: (status, weight) of new orders.
    """

    def __init__(
        self,
        lh: Lakehouse,
        every: float,
        on_commit: Callable[[float, int], None],
        *,
        first_order_id: int = 1000,
        seed: int | None = None,
        promotion_every: float = 20.0,
        statuses: Sequence[tuple[str, int]] = (
            ("completed", 85),
            ("pending", 10),
            ("cancelled", 5),
        ),
    ) -> None:
        super().__init__(name="dyntables-demo-writer", daemon=True)
        self.lh = lh
        self.every = every
        self.on_commit = on_commit
        self.next_id = first_order_id
        self.rng = random.Random(seed)
        self.promotion_every = promotion_every
        self.statuses = [s for s, _ in statuses]
        self.status_weights = [w for _, w in statuses]
        self.promotion: str | None = None
        self.error: str | None = None
        self._halt = threading.Event()
        rows = lh.sql("SELECT product_id, category, unit_price FROM ods_products").collect()
        self.products = [Product(int(r[0]), str(r[1]), Decimal(r[2])) for r in rows]

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        started = time.monotonic()
        due = started + self.every
        categories = sorted({p.category for p in self.products})
        while not self._halt.wait(max(0.0, due - time.monotonic())):
            due = max(due + self.every, time.monotonic())
            phase = int((time.monotonic() - started) // self.promotion_every)
            self.promotion = categories[phase % len(categories)] if phase else None
            try:
                completed = self.write_batch(self.rng.randint(1, 3))
            except Exception as exc:  # show it and stop writing; the pipeline keeps going
                self.error = " ".join(str(exc).split())[:300]
                return
            self.on_commit(time.time(), completed)

    def write_batch(self, size: int) -> int:
        """INSERT ``size`` orders in one commit; returns how many are completed."""
        weights = [3.0 if p.category == self.promotion else 1.0 for p in self.products]
        values, completed = [], 0
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        for _ in range(size):
            product = self.rng.choices(self.products, weights)[0]
            quantity = self.rng.randint(1, 3)
            status = self.rng.choices(self.statuses, self.status_weights)[0]
            completed += status == "completed"
            amount = product.unit_price * quantity
            values.append(
                f"({self.next_id}, {product.product_id}, {quantity}, {amount}, '{status}', TIMESTAMP '{now}')"
            )
            self.next_id += 1
        self.lh.sql("INSERT INTO ods_orders VALUES " + ", ".join(values))
        return completed


# -- watching the pipeline -------------------------------------------------------------------


class PipelineWatch:
    """Scheduler listener: latest refresh per layer, counts, recent lines, and the
    end-to-end latency of every batch (commit -> the leaderboard reflects it)."""

    def __init__(self, namespace_prefix: str) -> None:
        self.prefix = namespace_prefix  # "catalog.namespace."
        self.lock = threading.Lock()
        self.latest: dict[str, ev.SchedulerEvent] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.recent: deque[str] = deque(maxlen=8)
        self.pending: list[float] = []  # commit times not yet on the leaderboard
        self.latencies: list[float] = []
        self.printer: Callable[[ev.SchedulerEvent], None] | None = None

    def __call__(self, event: ev.SchedulerEvent) -> None:
        table = event.name.removeprefix(self.prefix)
        with self.lock:
            if event.kind == ev.REFRESHED:
                self.latest[table] = event
                mode = event.mode or "?"
                self.counts.setdefault(table, {}).setdefault(mode, 0)
                self.counts[table][mode] += 1
                if table == TOP and event.as_of is not None:
                    seen = [t for t in self.pending if t <= event.as_of]
                    self.latencies.extend(event.time - t for t in seen)
                    self.pending = [t for t in self.pending if t > event.as_of]
            elif event.kind == ev.FAILED:
                self.counts.setdefault(table, {}).setdefault("FAILED", 0)
                self.counts[table]["FAILED"] += 1
            if event.kind != ev.REFRESHED or event.mode != "NO_DATA":
                self.recent.append(_short_line(event, table))
        if self.printer is not None:
            self.printer(event)

    def committed(self, at: float) -> None:
        with self.lock:
            self.pending.append(at)


def _short_line(event: ev.SchedulerEvent, table: str) -> str:
    """An event in one short line for the live view (the full format is for logs)."""
    clock = datetime.fromtimestamp(event.time, UTC).strftime("%H:%M:%S")
    if event.kind == ev.REFRESHED:
        lag = "" if event.lag_s is None else f"  lag {event.lag_s:.1f}s"
        return (
            f"{clock} {table} {event.mode} +{event.rows_inserted}/-{event.rows_deleted} "
            f"in {event.duration_s or 0:.1f}s{lag}"
        )
    if event.kind == ev.BACKLOG:
        return (
            f"{clock} BACKLOG {table}: a refresh takes {event.duration_s or 0:.1f}s, "
            f"the interval is {event.interval_s or 0:g}s: refreshes run back to back"
        )
    return f"{clock} {event.kind.upper()} {table}: {(event.message or '')[:90]}"


# -- output ------------------------------------------------------------------------------------


class PlainOutput:
    """``--no-live``: plain lines, for logs and tests."""

    live = False

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def step(self, text: str) -> None:
        self.say()
        self.say(f"== {text}")

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.say(title)
        self.say(render_table(columns, rows))

    def check(self, label: str, passed: bool) -> None:
        self.say(f"  [{'ok' if passed else 'MISMATCH'}] {label}")

    def event(self, event: ev.SchedulerEvent) -> None:
        """Every refresh that did something, and every problem; NO_DATA is counted only."""
        if event.kind == ev.REFRESHED and event.mode == "NO_DATA":
            return
        if event.kind in (ev.INFO, ev.BUSY):
            return
        self.say("  " + ev.format_event(event).replace(self.prefix, ""))


class RichOutput(PlainOutput):
    """The terminal view: the same steps, styled, and a live dashboard for step 4."""

    live = True

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix)
        from rich.console import Console

        self.console: Console = Console()

    def say(self, text: str = "") -> None:
        self.console.print(text, highlight=False)

    def step(self, text: str) -> None:
        self.console.print()
        self.console.rule(f"[bold]{text}", align="left")

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.console.print(_rich_table(title, columns, rows))

    def check(self, label: str, passed: bool) -> None:
        mark = "[green]✓[/]" if passed else "[red]✗[/]"
        self.console.print(f"  {mark} {label}")

    def event(self, event: ev.SchedulerEvent) -> None:
        pass  # the live view shows events itself


def _board_rows(board: Sequence[Standing], previous: Sequence[Standing] = ()) -> list[list[object]]:
    before = {s.category: s for s in previous}
    rows: list[list[object]] = []
    for s in board:
        old = before.get(s.category)
        delta = f"+{s.gmv - old.gmv}" if old is not None and s.gmv != old.gmv else ""
        move = ""
        if old is not None and old.rank != s.rank:
            move = "▲" if s.rank < old.rank else "▼"
        rows.append(
            [
                f"{s.rank}{move}",
                s.category,
                s.gmv,
                s.order_cnt,
                s.total_quantity,
                s.avg_price,
                delta,
            ]
        )
    return rows


BOARD_COLUMNS = ["#", "category", "GMV", "orders", "units", "avg price", "new GMV"]


def _layer_rows(watch: PipelineWatch, now: float) -> list[list[object]]:
    rows: list[list[object]] = []
    with watch.lock:
        for _, table in LAYERS:
            e = watch.latest.get(table)
            counts = watch.counts.get(table, {})
            tally = f"{counts.get('INCREMENTAL', 0)} / {counts.get('FULL', 0)} / {counts.get('NO_DATA', 0)}"
            if counts.get("FAILED"):
                tally += f" / {counts['FAILED']} failed"
            if e is None:
                rows.append([table, "-", "-", "-", "-", "-", tally])
                continue
            lag = "-" if e.lag_s is None else f"{e.lag_s:.1f}s"
            rows.append(
                [
                    table,
                    f"{now - e.time:.0f}s ago",
                    e.mode,
                    f"+{e.rows_inserted}/-{e.rows_deleted}",
                    f"{e.duration_s or 0:.1f}s",
                    lag,
                    tally,
                ]
            )
    return rows


LAYER_COLUMNS = ["table", "last", "mode", "rows", "took", "lag", "incr / full / no-data"]


def _rich_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Any:
    """Compact (fits 80 columns): no vertical rules, names never wrapped."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for index, column in enumerate(columns):
        numeric = bool(rows) and all(isinstance(r[index], int | Decimal | float) for r in rows)
        table.add_column(column, justify="right" if numeric else "left", no_wrap=index < 2)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    return table


def _latency_line(latencies: Sequence[float]) -> str:
    if not latencies:
        return "end-to-end latency: waiting for the first batch to reach the leaderboard"
    return (
        f"end-to-end latency (order commit -> leaderboard): last {latencies[-1]:.1f}s, "
        f"p50 {percentile(latencies, 50):.1f}s, p95 {percentile(latencies, 95):.1f}s "
        f"over {len(latencies)} batch{'es' if len(latencies) != 1 else ''}"
    )


# -- the demo --------------------------------------------------------------------------------


class Demo:
    """The five steps, sharing one report, one pipeline watch and one way of printing."""

    def __init__(self, lh: Lakehouse, out: PlainOutput, interval: float, namespace: str) -> None:
        self.lh = lh
        self.out = out
        self.every = interval
        self.interval_seconds = max(1, math.ceil(interval))
        self.report = DemoReport(namespace)
        self.prefix = f"{lh.catalog}.{namespace}."
        self.watch = PipelineWatch(self.prefix)
        self.watch.printer = out.event
        self.scheduler: Scheduler | None = None
        self.writer: OrderWriter | None = None
        self.started = datetime.now(UTC)
        self._stop = threading.Event()

    # steps 1 and 2 ---------------------------------------------------------------------------
    def build(self) -> None:
        out = self.out
        out.step(
            f"1/5  Source tables and the seed's initial orders (namespace {self.report.namespace})"
        )
        self.lh.sql(read_script(SOURCES))
        self.lh.sql(read_script(INITIAL_ORDERS))
        out.say(
            f"  ods_products, ods_orders: {SCRIPTS_DIR}/{SOURCES}, {SCRIPTS_DIR}/{INITIAL_ORDERS}"
        )

        out.step(
            f"2/5  Three layers of dynamic tables, REFRESH INTERVAL {self.interval_seconds} SECOND"
        )
        t0 = time.monotonic()
        self.lh.sql(read_script(DYNAMIC_TABLES, self.interval_seconds))
        out.say(
            f"  DWD dwd_orders_enriched (join + filter) -> ADS ads_category_gmv (aggregate) -> "
            f"ADS ads_category_rank (RANK); built in {time.monotonic() - t0:.1f}s"
        )
        board = leaderboard(self.lh)
        products = orders_by_product(self.lh, "Sports & Outdoors")
        self.report.initial, self.report.sports_orders_by_product = board, products
        out.table("  leaderboard after the initial orders", BOARD_COLUMNS, _board_rows(board))
        for label, passed in initial_checks(board, products):
            self._check(label, passed)

    # step 3 -------------------------------------------------------------------------------------
    def start_scheduler(self) -> None:
        self.scheduler = self.lh.start_scheduler(
            workers=2, tick=1.0, namespaces=[self.report.namespace], listeners=[self.watch]
        )

    def second_batch(self) -> None:
        out = self.out
        out.step("3/5  The seed's second batch of orders arrives; the scheduler takes over")
        before = self.report.initial
        self.lh.sql(read_script(SECOND_BATCH))
        committed = time.time()
        self.watch.committed(committed)
        self.start_scheduler()
        out.say(
            f"  {SCRIPTS_DIR}/{SECOND_BATCH} committed; the scheduler is running (no REFRESH "
            "statement anywhere): waiting for the pipeline to refresh itself..."
        )
        reflected = self.wait_for_pipeline(committed)
        if reflected is None:
            self._check(f"the pipeline reflected the batch within {PIPELINE_TIMEOUT:.0f}s", False)
            return
        self.report.second_batch_latency = reflected - committed
        out.say(
            f"  the leaderboard reflects the batch {reflected - committed:.1f}s after its commit"
        )
        after = leaderboard(self.lh)
        self.report.after_second_batch = after
        out.table("  leaderboard after the second batch", BOARD_COLUMNS, _board_rows(after, before))
        for label, passed in second_batch_checks(before, after):
            self._check(label, passed)

    def wait_for_pipeline(self, committed: float) -> float | None:
        """When the top layer reflected every commit made before ``committed``."""
        assert self.scheduler is not None
        top = self.prefix + TOP
        deadline = time.monotonic() + PIPELINE_TIMEOUT
        while time.monotonic() < deadline and not self._stop.is_set():
            as_of = self.scheduler.as_of(top)
            if as_of is not None and as_of >= committed:
                event = self.scheduler.last.get(top)
                return event.time if event is not None else time.time()
            time.sleep(0.1)
        return None

    # step 4 --------------------------------------------------------------------------------------
    def stream(self, duration: float | None) -> None:
        out = self.out
        until = "until Ctrl-C" if duration is None else f"for {duration:g}s (Ctrl-C stops earlier)"
        out.step(f"4/5  A live order stream, {until}")
        self.writer = OrderWriter(self.lh, self.every, self._on_commit)
        self.writer.start()
        deadline = None if duration is None else time.monotonic() + duration
        with self._ctrl_c_stops():
            if out.live:
                self._live(deadline)
            else:
                self._plain(deadline)
        self.writer.stop()
        self.writer.join(timeout=60)

    def _on_commit(self, at: float, completed: int) -> None:
        self.report.batches += 1
        self.report.orders += completed
        self.watch.committed(at)

    def _waiting(self, deadline: float | None, step: float) -> Iterator[None]:
        while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
            yield
            self._stop.wait(
                step if deadline is None else max(0.0, min(step, deadline - time.monotonic()))
            )

    def _top_snapshot(self) -> int | None:
        table = load_table(self.lh.spark, self.lh.qualify(TOP))
        return table.current_snapshot_id() if table is not None else None

    def _plain(self, deadline: float | None) -> None:
        """Print the leaderboard whenever the pipeline changed it."""
        shown = self._top_snapshot()
        for _ in self._waiting(deadline, 0.5):
            snapshot = self._top_snapshot()
            if snapshot == shown:
                continue
            shown, board = snapshot, leaderboard(self.lh)
            ranking = " | ".join(f"{s.rank}. {s.category} {s.gmv}" for s in board)
            self.out.say(f"  leaderboard: {ranking}")

    def _live(self, deadline: float | None) -> None:
        from rich.live import Live

        assert isinstance(self.out, RichOutput)
        shown = self._top_snapshot()
        board = self.report.after_second_batch or self.report.initial
        previous: list[Standing] = list(self.report.initial)
        with Live(
            self._dashboard(board, previous), console=self.out.console, refresh_per_second=4
        ) as live:
            for _ in self._waiting(deadline, 0.25):
                snapshot = self._top_snapshot()
                if snapshot != shown:
                    shown, previous, board = snapshot, board, leaderboard(self.lh)
                live.update(self._dashboard(board, previous))

    def _dashboard(self, board: Sequence[Standing], previous: Sequence[Standing]) -> RenderableType:
        from rich.console import Group

        writer = self.writer
        status = f"orders written: {self.report.orders} in {self.report.batches} batches"
        if writer is not None and writer.promotion:
            status += f"   promotion: {writer.promotion}"
        if writer is not None and writer.error:
            status += f"\n[red]the order writer stopped: {writer.error}[/]"
        with self.watch.lock:
            latencies = list(self.watch.latencies)
            recent = list(self.watch.recent)[-6:]
        return Group(
            f"[bold]Real-time sales dashboard[/]   [dim]Ctrl-C to stop[/]\n{status}",
            _rich_table(f"leaderboard: {TOP}", BOARD_COLUMNS, _board_rows(board, previous)),
            _rich_table(
                "pipeline: latest refresh of each layer (lag: from the oldest order it may miss)",
                LAYER_COLUMNS,
                _layer_rows(self.watch, time.time()),
            ),
            _latency_line(latencies),
            "",
            "[dim]" + "\n".join(recent or ["waiting for the first refresh"]) + "[/]",
        )

    @contextmanager
    def _ctrl_c_stops(self) -> Iterator[None]:
        """Ctrl-C ends the live part (not the process): a flag, not an exception thrown
        into the middle of a Spark call."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self._stop.set()

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    # step 5 -------------------------------------------------------------------------------------
    def stop(self) -> None:
        if self.writer is not None:
            self.writer.stop()
        if self.scheduler is not None and self.scheduler.running:
            self.out.say(
                "  stopping: waiting for the refreshes in flight (they commit whole or not at all)"
            )
        self.lh.stop_scheduler(STOP_TIMEOUT)

    def summary(self) -> None:
        out = self.out
        out.step("5/5  Refresh history of the three layers")
        history = self.lh.commands.registry.history.current_table()
        where = (
            f"schema_name = '{self.report.namespace}' AND name IN ({', '.join(repr(t) for _, t in LAYERS)}) "
            f"AND start_time >= TIMESTAMP '{self.started.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
        )
        grouped = self.lh.sql(
            "SELECT name, refresh_trigger, refresh_mode, state, COUNT(*), "
            "SUM(CAST(get_json_object(stats, '$.rows_inserted') AS BIGINT)), SUM(duration_ms) "
            f"FROM {history} WHERE {where} GROUP BY name, refresh_trigger, refresh_mode, state"
        ).collect()
        table_rows = []
        for _, table in LAYERS:
            mine = [r for r in grouped if r[0] == table]
            count = _counter(mine)
            incremental = [r for r in mine if r[2] == "INCREMENTAL" and r[3] == "SUCCEED"]
            runs = sum(int(r[4]) for r in incremental)
            average = sum(int(r[6]) for r in incremental) / runs / 1000 if runs else None
            table_rows.append(
                [
                    table,
                    count("FULL", "SUCCEED"),
                    count("INCREMENTAL", "SUCCEED"),
                    count("NO_DATA", "SUCCEED"),
                    count(None, "FAILED"),
                    count(None, "QUEUED"),
                    sum(int(r[5] or 0) for r in mine),
                    "-" if average is None else f"{average:.2f}s",
                ]
            )
            for r in mine:
                if r[1] == "SYSTEM_SCHEDULED" and r[3] == "SUCCEED":
                    self.report.scheduled_modes.setdefault(table, {})[r[2]] = int(r[4])
        out.table(
            "  refreshes per layer (FULL: the build at CREATE, and the leaderboard's re-rank of all rows;"
            " NO_DATA: nothing changed, nothing ran)",
            [
                "table",
                "FULL",
                "INCREMENTAL",
                "NO_DATA",
                "failed",
                "skipped",
                "rows in",
                "avg incr.",
            ],
            table_rows,
        )
        latest = self.lh.sql(
            "SELECT name, state, refresh_mode, refresh_trigger, start_time, duration_ms, stats "
            f"FROM {history} WHERE {where} ORDER BY start_time DESC LIMIT 9"
        ).collect()
        out.table(
            "  the latest refreshes (SHOW DYNAMIC TABLE REFRESH HISTORY has every column)",
            ["name", "state", "refresh_mode", "trigger", "start", "took", "rows +/-"],
            [
                [
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    r[4].strftime("%H:%M:%S"),
                    f"{int(r[5]) / 1000:.2f}s",
                    "+{}/-{}".format(*_row_counts(r[6])),
                ]
                for r in latest
            ],
        )
        with self.watch.lock:
            self.report.latencies = list(self.watch.latencies)
            behind = len(self.watch.pending)
        out.say(
            f"  the order stream wrote {self.report.orders} completed orders in "
            f"{self.report.batches} batches ({behind} not on the leaderboard yet when it stopped)"
        )
        out.say("  " + _latency_line(self.report.latencies))
        if self.report.latencies:
            out.say(
                f"  max {max(self.report.latencies):.1f}s; the lag is about the sum of the three "
                "layers' refresh times (each has a fixed cost of seconds on a small machine)"
            )
        if self.writer is not None and self.writer.error:
            out.say(f"  the order writer stopped early: {self.writer.error}")
        out.say()
        ns = self.report.namespace
        out.say(f"  the SQL: examples/{SCRIPTS_DIR}/*.sql; the tables stay in namespace {ns}:")
        out.say(f'    dyntables sql -e "SELECT * FROM {ns}.{TOP} ORDER BY gmv_rank"')
        out.say(f"    dyntables scheduler --namespace {ns}      # keep them refreshing")

    def _check(self, label: str, passed: bool) -> None:
        self.report.checks.append((label, passed))
        self.out.check(label, passed)


def run_demo(
    lh: Lakehouse,
    duration: float | None = None,
    live: bool = True,
    interval: float = 1.0,
    *,
    namespace: str = DEMO_NAMESPACE,
) -> DemoReport:
    """Run the five steps; the live part lasts ``duration`` seconds (None: until Ctrl-C).

    ``interval``: refresh interval of the three tables (whole seconds, rounded up) and
    the pace of the order writer. Raises when a figure differs from the seed's.
    """
    from dyntables.lakehouse import Lakehouse

    # A session of its own: USE <namespace> there leaves the caller's session alone.
    session = Lakehouse(spark=lh.spark.newSession(), catalog=lh.catalog, namespace=namespace)
    prefix = f"{lh.catalog}.{namespace}."
    out: PlainOutput = RichOutput(prefix) if live else PlainOutput(prefix)
    demo = Demo(session, out, interval, namespace)
    try:
        try:
            demo.build()
            demo.second_batch()
            demo.stream(duration)
        finally:
            demo.stop()
        demo.summary()
    finally:
        session.close()
    failed = [label for label, passed in demo.report.checks if not passed]
    if failed:
        raise DynTablesError("the demo's figures differ from the seed's: " + "; ".join(failed))
    return demo.report


__all__ = [
    "DemoReport",
    "OrderWriter",
    "Standing",
    "leaderboard",
    "percentile",
    "read_script",
    "run_demo",
]
