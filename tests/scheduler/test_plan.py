"""The scheduler's decisions, with a fake clock: no Spark, milliseconds per test."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from dyntables.scheduler.graph import Graph, GraphCycleError
from dyntables.scheduler.plan import (
    BUSY,
    DUE,
    FAILED,
    NOT_RUN,
    PULLED,
    SKIPPED,
    SUCCEEDED,
    Cycle,
    Planner,
    Policy,
    TableView,
)


class FakeClock:
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def view(
    name: str,
    *sources: str,
    interval: float | None = 60,
    last: float | None = 0.0,
    active: bool = True,
) -> TableView:
    return TableView(name, tuple(sources), interval, active, last)


def planner(*views: TableView, policy: Policy | None = None) -> Planner:
    p = Planner(policy or Policy())
    p.observe(views)
    return p


def run(cycle: Cycle, outcomes: dict[str, str] | None = None) -> list[str]:
    """Drive a cycle to the end one ready table at a time; returns the start order."""
    outcomes = outcomes or {}
    order: list[str] = []
    while not cycle.done:
        ready = cycle.ready()
        assert ready, f"stuck: {cycle.state}"
        name = ready[0]
        cycle.start(name)
        order.append(name)
        cycle.finish(name, outcomes.get(name, SUCCEEDED))
    return order


def names(cycles: Iterable[Cycle]) -> list[set[str]]:
    return [set(c.order) for c in cycles]


# -- graph ----------------------------------------------------------------------------------


def test_graph_ignores_base_tables_and_orders_upstream_first() -> None:
    g = Graph.build({"d": ["b", "c"], "b": ["a", "base"], "c": ["a"], "a": ["base"]})
    assert g.upstreams["b"] == {"a"}
    assert g.topological() == ["a", "b", "c", "d"]
    assert g.levels(["a", "b", "c", "d"]) == [["a"], ["b", "c"], ["d"]]
    assert g.downstream_closure("a") == {"b", "c", "d"}
    assert g.components() == [frozenset("abcd")]


def test_graph_components_and_loops() -> None:
    g = Graph.build({"a": [], "b": ["a"], "x": ["y"], "y": ["x"], "z": ["y"]})
    assert sorted(sorted(c) for c in g.components()) == [["a", "b"], ["x", "y", "z"]]
    assert g.cyclic_nodes() == {"x", "y", "z"}
    with pytest.raises(GraphCycleError):
        g.topological()


# -- due ------------------------------------------------------------------------------------


def test_due_when_interval_elapsed_since_last_refresh() -> None:
    clock = FakeClock(100.0)
    p = planner(view("a", "base", interval=60, last=50.0))
    assert p.due(clock()) == {}
    clock.now = 110.0
    assert p.due(clock()) == {"a": DUE}


def test_intervals_down_to_one_second() -> None:
    p = planner(view("a", "base", interval=1, last=100.0))
    assert p.due(100.9) == {}
    assert p.due(101.0) == {"a": DUE}


def test_never_refreshed_is_due_and_unscheduled_or_suspended_are_not() -> None:
    p = planner(
        view("new", "base", last=None),
        view("manual", "base", interval=None, last=None),
        view("paused", "base", last=None, active=False),
    )
    assert p.due(5.0) == {"new": DUE}


def test_no_data_attempt_restarts_the_interval() -> None:
    """A NO_DATA refresh commits nothing, so the committed time stays old: the
    scheduler's own attempt time keeps an idle table from being due at every tick."""
    p = planner(view("a", "base", interval=10, last=0.0))
    assert p.due(100.0) == {"a": DUE}
    p.succeeded("a", started=100.0)
    assert p.due(105.0) == {}
    assert p.due(110.0) == {"a": DUE}


def test_restart_resumes_from_the_committed_time() -> None:
    committed = view("a", "base", interval=30, last=1000.0)
    fresh = planner(committed)  # a new scheduler: no memory at all
    assert fresh.due(1020.0) == {}
    assert fresh.due(1030.0) == {"a": DUE}


def test_next_due_is_the_earliest_interval_end() -> None:
    p = planner(
        view("a", "base", interval=10, last=100.0), view("b", "base", interval=3, last=100.0)
    )
    assert p.next_due(101.0) == 103.0
    assert p.next_due(101.0, busy=["b"]) == 110.0
    assert planner(view("m", "base", interval=None)).next_due(1.0) is None


# -- ordering and pulling downstreams along -------------------------------------------------


def three_layers(last: float = 0.0, interval: float = 60) -> Planner:
    return planner(
        view("dwd", "orders", "products", interval=interval, last=last),
        view("ads", "dwd", interval=interval, last=last + 2),
        view("rank", "ads", interval=interval, last=last + 4),
    )


def test_downstreams_refresh_right_after_their_upstream_in_the_same_cycle() -> None:
    p = three_layers(last=0.0)
    # dwd is due at 60; ads (due at 62) and rank (at 64) come along: ~1 interval end to end
    (cycle,) = p.plan(60.0)
    assert cycle.reasons == {"dwd": DUE, "ads": PULLED, "rank": PULLED}
    assert run(cycle) == ["dwd", "ads", "rank"]
    assert cycle.levels == [["dwd"], ["ads"], ["rank"]]


def test_nothing_due_means_no_cycle_and_downstream_alone_runs_alone() -> None:
    p = three_layers(last=0.0)
    assert p.plan(59.0) == []
    p2 = planner(
        view("dwd", "orders", interval=60, last=30.0), view("ads", "dwd", interval=60, last=0.0)
    )
    (cycle,) = p2.plan(61.0)
    assert cycle.reasons == {"ads": DUE}


def test_a_long_interval_downstream_is_not_dragged_along_at_the_upstream_pace() -> None:
    p = planner(
        view("fast", "base", interval=1, last=0.0), view("hourly", "fast", interval=3600, last=0.0)
    )
    (cycle,) = p.plan(10.0)
    assert cycle.reasons == {"fast": DUE}
    # ...but when it falls due within the upstream's next interval it joins its cycle
    (cycle,) = p.plan(3599.5)
    assert cycle.reasons == {"fast": DUE, "hourly": PULLED}
    assert run(cycle) == ["fast", "hourly"]


def test_diamond_refreshes_the_bottom_after_both_sides() -> None:
    p = planner(
        view("a", "base", interval=5, last=0.0),
        view("b", "a", interval=5, last=1.0),
        view("c", "a", interval=5, last=1.0),
        view("d", "b", "c", interval=5, last=2.0),
    )
    (cycle,) = p.plan(5.0)
    assert set(cycle.order) == {"a", "b", "c", "d"}
    assert cycle.ready() == ["a"]
    cycle.start("a")
    assert cycle.ready() == []
    cycle.finish("a", SUCCEEDED)
    assert cycle.ready() == ["b", "c"]  # in parallel
    cycle.start("b")
    cycle.start("c")
    cycle.finish("b", SUCCEEDED)
    assert cycle.ready() == []  # never between b and c
    cycle.finish("c", SUCCEEDED)
    assert cycle.ready() == ["d"]
    assert cycle.levels == [["a"], ["b", "c"], ["d"]]


def test_independent_pipelines_get_independent_cycles() -> None:
    p = planner(
        view("a1", "base", interval=1, last=0.0),
        view("a2", "a1", interval=1, last=0.0),
        view("b1", "other", interval=1, last=0.0),
    )
    cycles = p.plan(10.0)
    assert names(cycles) == [{"a1", "a2"}, {"b1"}]
    # while a1's pipeline is busy it gets no new cycle; b1's does
    assert names(p.plan(11.0, busy=cycles[0].component)) == [{"b1"}]


def test_a_table_never_has_two_refreshes_at_once() -> None:
    """A component with a cycle in flight is never planned again, however overdue."""
    p = planner(
        view("slow", "base", interval=1, last=0.0), view("down", "slow", interval=1, last=0.0)
    )
    (first,) = p.plan(10.0)
    first.start("slow")
    for t in (11.0, 12.0, 50.0):
        assert p.plan(t, busy=first.component) == []
    first.finish("slow", SUCCEEDED)
    p.succeeded("slow", 10.0)
    first.start("down")
    first.finish("down", SUCCEEDED)
    p.succeeded("down", 12.0)
    assert first.done
    # the refresh took longer than the interval: the next one starts right after it
    assert names(p.plan(50.0)) == [{"slow", "down"}]


def test_cycle_refuses_out_of_order_transitions() -> None:
    (cycle,) = planner(view("a", "base", last=None)).plan(1.0)
    with pytest.raises(ValueError):
        cycle.finish("a", SUCCEEDED)
    cycle.start("a")
    with pytest.raises(ValueError):
        cycle.start("a")


def test_tables_in_a_dependency_loop_are_left_alone() -> None:
    p = planner(view("x", "y", last=None), view("y", "x", last=None), view("ok", "base", last=None))
    assert p.due(1.0) == {"ok": DUE}
    assert p.next_due(1.0) == 1.0


# -- failures ---------------------------------------------------------------------------------


def test_failure_skips_every_downstream_in_the_cycle_with_the_root_cause() -> None:
    p = planner(
        view("a", "base", interval=5, last=0.0),
        view("b", "a", interval=5, last=0.0),
        view("c", "b", interval=5, last=0.0),
        view("side", "base2", interval=5, last=0.0),
    )
    cycles = p.plan(10.0)
    chain = next(c for c in cycles if "a" in c.order)
    chain.start("a")
    skips = chain.finish("a", FAILED)
    assert [(s.name, s.upstream) for s in skips] == [("b", "a"), ("c", "a")]
    assert skips[0].message == "skipped: upstream a failed"
    assert chain.state == {"a": FAILED, "b": SKIPPED, "c": SKIPPED}
    assert chain.done


def test_busy_upstream_skips_downstreams_but_suspended_one_does_not() -> None:
    p = planner(view("a", "base", interval=5, last=0.0), view("b", "a", interval=5, last=0.0))
    (cycle,) = p.plan(10.0)
    cycle.start("a")
    (skip,) = cycle.finish("a", BUSY)
    assert "being refreshed outside this scheduler" in skip.message
    (cycle,) = p.plan(10.0)
    cycle.start("a")
    assert cycle.finish("a", NOT_RUN) == []  # found suspended: b reads its committed data
    assert cycle.ready() == ["b"]


def test_exponential_backoff_capped() -> None:
    policy = Policy(max_failures=100, backoff_base=2.0, backoff_cap=30.0)
    assert [policy.backoff(n) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    clock = FakeClock(100.0)
    p = planner(view("a", "base", interval=1, last=0.0), policy=policy)
    decision = p.failed("a", started=clock(), ended=clock.advance(1.0), error="boom")
    assert (decision.failures, decision.retry_in, decision.suspend) == (1, 2.0, False)
    assert p.due(102.9) == {}
    assert p.due(103.0) == {"a": DUE}
    p.failed("a", started=103.0, ended=104.0, error="boom")
    assert p.due(107.9) == {}
    assert p.due(108.0) == {"a": DUE}
    assert p.next_due(104.0) == 108.0


def test_backoff_also_holds_back_pulling_along() -> None:
    p = planner(view("a", "base", interval=1, last=0.0), view("b", "a", interval=1, last=0.0))
    p.failed("b", started=9.0, ended=10.0, error="boom")
    (cycle,) = p.plan(10.5)
    assert cycle.reasons == {"a": DUE}


def test_success_resets_the_failure_count() -> None:
    p = planner(view("a", "base", interval=1, last=0.0), policy=Policy(max_failures=3))
    p.failed("a", 1.0, 2.0, "boom")
    p.failed("a", 5.0, 6.0, "boom")
    p.succeeded("a", 20.0)
    assert p.health["a"].failures == 0 and p.health["a"].retry_at is None
    assert not p.failed("a", 30.0, 31.0, "boom").suspend


def test_suspend_after_n_consecutive_failures() -> None:
    p = planner(
        view("a", "base", interval=1, last=0.0), policy=Policy(max_failures=3, backoff_base=1.0)
    )
    decisions = [p.failed("a", float(t), float(t) + 1, f"error {t}") for t in (10, 20, 30)]
    assert [d.suspend for d in decisions] == [False, False, True]
    last = decisions[-1]
    assert last.suspend_reason is not None
    assert last.suspend_reason.startswith("suspended after 3 consecutive refresh failures")
    assert "error 30" in last.suspend_reason


def test_suspend_and_resume_are_honoured_at_the_next_planning_pass() -> None:
    p = planner(
        view("a", "base", interval=1, last=0.0),
        view("b", "a", interval=1, last=0.0),
        policy=Policy(max_failures=2),
    )
    p.failed("a", 1.0, 2.0, "boom")
    # ALTER DYNAMIC TABLE a SUSPEND: the next pass sees it and plans nothing for it
    p.observe(
        [
            view("a", "base", interval=1, last=0.0, active=False),
            view("b", "a", interval=1, last=0.0),
        ]
    )
    (cycle,) = p.plan(100.0)
    assert cycle.reasons == {"b": DUE}
    assert p.health["a"].failures == 0  # the failure record is forgotten
    # RESUME: due again at once, with a full set of attempts before the next suspension
    p.observe([view("a", "base", interval=1, last=0.0), view("b", "a", interval=1, last=0.0)])
    (cycle,) = p.plan(100.0)
    assert cycle.reasons == {"a": DUE, "b": DUE}
    assert not p.failed("a", 100.0, 101.0, "boom").suspend


def test_dropped_tables_are_forgotten() -> None:
    p = planner(view("a", "base", last=None))
    p.failed("a", 1.0, 2.0, "boom")
    p.observe([])
    assert p.health == {} and p.plan(10.0) == []


# -- freshness bookkeeping ----------------------------------------------------------------------


def test_as_of_is_the_oldest_start_along_the_chain() -> None:
    p = three_layers()
    assert p.succeeded("dwd", started=100.0) == 100.0
    assert p.succeeded("ads", started=103.0) == 100.0  # reflects base commits up to dwd's start
    assert p.succeeded("rank", started=107.0) == 100.0
    assert p.succeeded("dwd", started=110.0) == 110.0
    assert p.succeeded("rank", started=111.0) == 100.0  # ads not refreshed since


def test_as_of_of_an_upstream_refreshed_elsewhere_is_its_commit_time() -> None:
    p = planner(
        view("up", "base", interval=None, last=50.0), view("down", "up", interval=1, last=0.0)
    )
    assert p.succeeded("down", started=100.0) == 50.0
