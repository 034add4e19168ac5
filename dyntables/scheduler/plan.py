"""What to refresh, when and in which order: pure decisions, no Spark, no threads.

Everything here is a function of the time ``now`` (epoch seconds, passed in: tests use a
fake clock), a fresh view of the catalog (:class:`TableView`, re-read every cycle so
``ALTER DYNAMIC TABLE ... SUSPEND``/``RESUME`` and new tables are picked up), and the
scheduler's in-memory bookkeeping (:class:`Health`: failures, backoff, last attempt).

Rules
-----
- **Due.** An ACTIVE table with an interval is due when ``anchor + interval <= now``.
  The anchor is the later of the committed refresh time (table metadata, so a restarted
  scheduler resumes from it) and this scheduler's last attempt (a NO_DATA refresh
  commits nothing, so without it an idle table would be due at every tick).
- **Pulled along.** A table whose upstream is in this cycle refreshes right after it in
  the same cycle, so a 3-layer pipeline with 1-minute intervals lags ~1 minute, not 3.
  Precisely: it is pulled in when it would fall due before that upstream's *next*
  refresh (``anchor + interval <= now + upstream interval``). With equal intervals that
  is always; a downstream with a much longer interval is not dragged along at its
  upstream's pace (its own interval stays meaningful) but, when it falls due, it joins
  the upstream's cycle instead of running between two of them.
- **Cycles.** The due tables of one weakly connected component form a cycle: each
  starts when all its upstreams *in the cycle* finished, so a diamond A->B, A->C,
  B+C->D refreshes D after both B and C (never in between). Components run their
  cycles independently; a component starts a new cycle only when its previous one
  ended, so one table never has two refreshes at once and a refresh longer than its
  interval simply delays the next one (no pile-up).
- **Failures.** A failed refresh is retried after an exponential backoff
  (``base * 2**(n-1)``, capped); its downstreams in the cycle are skipped; after
  ``max_failures`` consecutive failures the table is suspended (the loop writes
  ``dyntables.state=SUSPENDED``). A table seen SUSPENDED starts over with a clean
  record when it is resumed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dyntables.scheduler.graph import Graph

# task states inside a cycle
PENDING = "PENDING"
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
BUSY = "BUSY"  # a refresh outside this scheduler holds the table's refresh lease
NOT_RUN = "NOT_RUN"  # found suspended or dropped just before it was to run
SKIPPED = "SKIPPED"  # an upstream in the same cycle failed
FINISHED = frozenset({SUCCEEDED, FAILED, BUSY, NOT_RUN, SKIPPED})
# an upstream that ended in one of these lets its downstreams run: their input is a
# committed, consistent version either way
PASSABLE = frozenset({SUCCEEDED, NOT_RUN})

# why a table is in a cycle
DUE = "due"
PULLED = "upstream refreshes"


@dataclass(frozen=True)
class TableView:
    """One dynamic table as the catalog shows it at the start of a planning pass."""

    name: str
    sources: tuple[str, ...] = ()  # qualified names; sources that are not DTs are ignored
    interval_s: float | None = None
    active: bool = True
    last_refresh: float | None = None  # epoch seconds of the last committed refresh
    vcluster: str = "DEFAULT"


@dataclass(frozen=True)
class Policy:
    """Retry and suspension settings."""

    max_failures: int = 5
    backoff_base: float = 2.0
    backoff_cap: float = 300.0

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure."""
        if failures <= 0:
            return 0.0
        return float(min(self.backoff_cap, self.backoff_base * 2 ** min(failures - 1, 60)))


@dataclass
class Health:
    """What the scheduler remembers about one table between cycles (lost on restart)."""

    failures: int = 0
    retry_at: float | None = None
    last_attempt: float | None = None  # start of this scheduler's last attempt
    last_error: str | None = None
    # the table reflects every base-table commit made before this time (None: unknown)
    as_of: float | None = None


@dataclass(frozen=True)
class FailureDecision:
    failures: int
    retry_in: float
    suspend: bool
    suspend_reason: str | None


@dataclass(frozen=True)
class Skip:
    """A table skipped in a cycle because an upstream did not refresh."""

    name: str
    upstream: str  # the table whose refresh failed (the root cause, not the nearest)
    upstream_state: str  # FAILED or BUSY

    @property
    def message(self) -> str:
        if self.upstream_state == FAILED:
            return f"skipped: upstream {self.upstream} failed"
        # its lease is held by a REFRESH of this process or by another process
        return f"skipped: upstream {self.upstream} is being refreshed outside this scheduler"


class Cycle:
    """The refreshes of one component at one time, and their progress.

    A small state machine: :meth:`ready` lists tables whose in-cycle upstreams all
    finished, :meth:`start` and :meth:`finish` move them along; a failure marks every
    pending downstream SKIPPED at once.
    """

    def __init__(
        self, graph: Graph, reasons: Mapping[str, str], component: frozenset[str], now: float
    ) -> None:
        self.component = component
        self.planned_at = now
        self.reasons = dict(reasons)
        self.order = graph.topological(reasons)
        members = set(reasons)
        self.deps = {n: graph.upstreams.get(n, frozenset()) & members for n in self.order}
        self.state = {n: PENDING for n in self.order}
        self.levels = graph.levels(members)
        self._graph = graph
        self.skips: list[Skip] = []

    def ready(self) -> list[str]:
        return [
            n
            for n in self.order
            if self.state[n] == PENDING and all(self.state[d] in PASSABLE for d in self.deps[n])
        ]

    def start(self, name: str) -> None:
        if self.state[name] != PENDING:
            raise ValueError(f"{name} is {self.state[name]}, not PENDING")
        self.state[name] = RUNNING

    def finish(self, name: str, outcome: str) -> list[Skip]:
        """Record ``outcome`` for ``name``; returns the downstreams skipped because of it."""
        if outcome not in FINISHED or outcome == SKIPPED:
            raise ValueError(f"not a task outcome: {outcome}")
        if self.state[name] != RUNNING:
            raise ValueError(f"{name} is {self.state[name]}, not RUNNING")
        self.state[name] = outcome
        if outcome in PASSABLE:
            return []
        skipped = []
        below = self._graph.downstream_closure(name)
        for down in self.order:
            if down in below and self.state[down] == PENDING:
                self.state[down] = SKIPPED
                skipped.append(Skip(down, name, outcome))
        self.skips.extend(skipped)
        return skipped

    @property
    def running(self) -> list[str]:
        return [n for n in self.order if self.state[n] == RUNNING]

    @property
    def done(self) -> bool:
        return all(s in FINISHED for s in self.state.values())


@dataclass
class Planner:
    """Plans cycles and keeps the per-table record of failures and attempts."""

    policy: Policy = field(default_factory=Policy)
    health: dict[str, Health] = field(default_factory=dict)
    views: dict[str, TableView] = field(default_factory=dict)
    graph: Graph = field(default_factory=lambda: Graph({}))

    # -- the catalog --------------------------------------------------------------------
    def observe(self, views: Iterable[TableView]) -> None:
        """Take a fresh catalog view. A table seen SUSPENDED loses its failure record, so
        RESUME gives it a full set of attempts; dropped tables are forgotten."""
        self.views = {v.name: v for v in views}
        self.graph = Graph.build({v.name: v.sources for v in self.views.values()})
        for name in list(self.health):
            if name not in self.views:
                del self.health[name]
        for view in self.views.values():
            record = self.health.get(view.name)
            if record is not None and not view.active:
                record.failures, record.retry_at, record.last_error = 0, None, None

    def record(self, name: str) -> Health:
        return self.health.setdefault(name, Health())

    # -- due-ness -----------------------------------------------------------------------
    def anchor(self, view: TableView) -> float | None:
        """When the interval of ``view`` started counting (None: never refreshed)."""
        attempt = self.health[view.name].last_attempt if view.name in self.health else None
        known = [t for t in (view.last_refresh, attempt) if t is not None]
        return max(known) if known else None

    def eligible(self, view: TableView, now: float) -> bool:
        """Scheduled at all right now: ACTIVE, with an interval, not backing off."""
        if not view.active or view.interval_s is None or view.interval_s <= 0:
            return False
        record = self.health.get(view.name)
        return record is None or record.retry_at is None or record.retry_at <= now

    def due_at(self, view: TableView) -> float:
        """Earliest time ``view`` is due by its own interval (ignoring upstreams)."""
        assert view.interval_s is not None
        anchor = self.anchor(view)
        due = -math.inf if anchor is None else anchor + view.interval_s
        record = self.health.get(view.name)
        if record is not None and record.retry_at is not None:
            due = max(due, record.retry_at)
        return due

    def due(self, now: float, exclude: Iterable[str] = ()) -> dict[str, str]:
        """Every table to refresh at ``now`` -> why (DUE or PULLED), upstream first."""
        excluded = set(exclude) | self.graph.cyclic_nodes()
        chosen: dict[str, str] = {}
        for name in self.graph.topological(set(self.views) - excluded):
            view = self.views[name]
            if not self.eligible(view, now):
                continue
            if self.due_at(view) <= now:
                chosen[name] = DUE
                continue
            ups = [
                self.views[u] for u in self.graph.upstreams.get(name, frozenset()) if u in chosen
            ]
            if ups:
                horizon = min(u.interval_s or 0.0 for u in ups)
                if self.due_at(view) <= now + horizon:
                    chosen[name] = PULLED
        return chosen

    def plan(self, now: float, busy: Iterable[str] = ()) -> list[Cycle]:
        """New cycles for the components with due tables and no cycle in progress.

        ``busy``: tables of the cycles still running; their whole component waits.
        """
        busy_set = set(busy)
        blocked: set[str] = set()
        for component in self.graph.components():
            if component & busy_set:
                blocked |= component
        chosen = self.due(now, exclude=blocked)
        cycles = []
        for component in self.graph.components():
            members = {n: r for n, r in chosen.items() if n in component}
            if members:
                cycles.append(Cycle(self.graph, members, component, now))
        return cycles

    def next_due(self, now: float, busy: Iterable[str] = ()) -> float | None:
        """When the next table falls due by its own interval (None: nothing scheduled)."""
        skip = set(busy) | self.graph.cyclic_nodes()
        times = [
            self.due_at(v)
            for v in self.views.values()
            if v.name not in skip and v.active and v.interval_s and v.interval_s > 0
        ]
        return max(min(times), now) if times else None

    # -- outcomes -----------------------------------------------------------------------
    def as_of(self, name: str, started: float) -> float:
        """Base-table commit time a refresh started at ``started`` reflects: all of its
        own sources as of ``started``, but its DT sources only as of *their* as-of."""
        result = started
        for up in self.graph.upstreams.get(name, frozenset()):
            record = self.health.get(up)
            upstream = record.as_of if record is not None and record.as_of is not None else None
            if upstream is None:  # refreshed by someone else: its commit time is the best bound
                upstream = self.views[up].last_refresh if up in self.views else None
            if upstream is not None:
                result = min(result, upstream)
        return result

    def succeeded(self, name: str, started: float) -> float:
        """Record a successful refresh (any mode); returns the table's new as-of time."""
        record = self.record(name)
        record.failures, record.retry_at, record.last_error = 0, None, None
        record.last_attempt = started
        record.as_of = self.as_of(name, started)
        return record.as_of

    def attempted(self, name: str, started: float) -> None:
        """A turn that did not refresh and is no failure (busy elsewhere, suspended)."""
        self.record(name).last_attempt = started

    def suspends_if_failed(self, name: str) -> str | None:
        """What suspending ``name`` will say if its next refresh fails (the failure's own
        history row says it, as the seeds' ``suspended_reason`` does), or None."""
        failures = self.record(name).failures + 1
        return _suspended(failures) if failures >= self.policy.max_failures else None

    def failed(self, name: str, started: float, ended: float, error: str) -> FailureDecision:
        record = self.record(name)
        record.failures += 1
        record.last_attempt = started
        record.last_error = error
        delay = self.policy.backoff(record.failures)
        record.retry_at = ended + delay
        suspend = record.failures >= self.policy.max_failures
        reason = None
        if suspend:
            reason = f"{_suspended(record.failures)}; last error: {error}"[:1000]
        return FailureDecision(record.failures, delay, suspend, reason)


def _suspended(failures: int) -> str:
    return f"suspended after {failures} consecutive refresh failures"
