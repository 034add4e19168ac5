"""The generator alone (no Spark): deterministic, valid SQL, and a text format that
round-trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings

from dyntables.plan.query import parse_query
from tests.differential.generate import (
    DAY_LITERAL,
    DEC,
    INT,
    SHAPES,
    STR,
    QueryGen,
    RandomChooser,
    Ref,
    Scenario,
    parse_scenario,
    scenario_from_seed,
    scenarios,
)

CORPUS = Path(__file__).with_name("scenarios")


def _normalized(sc: Scenario) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.op, tuple(" ".join(a.split()) for a in s.args)) for s in sc.steps]


def _check(sc: Scenario) -> None:
    assert sc.dynamic_tables and sc.tables
    for step in sc.steps:
        if step.op == "create_dt":
            parse_query(step.args[1])  # parses (as the compiler does: window() too)
        if step.op in ("refresh", "refresh_full", "no_data", "fault"):
            assert step.args[0] in sc.dynamic_tables
    again = parse_scenario(sc.to_text())
    assert _normalized(again) == _normalized(sc)
    assert again.tags == sc.tags


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_generates_valid_scenarios(shape: str) -> None:
    for seed in range(40):
        sc = scenario_from_seed(seed, shape, faults=True)
        _check(sc)
        assert sc.seed == seed and sc.shape == shape


def test_a_seed_replays_the_same_scenario() -> None:
    assert scenario_from_seed(42).to_text() == scenario_from_seed(42).to_text()
    assert scenario_from_seed(42).to_text() != scenario_from_seed(43).to_text()


def test_shapes_carry_their_tags() -> None:
    seen: set[str] = set()
    for seed in range(30):
        for shape in SHAPES:
            sc = scenario_from_seed(seed, shape)
            seen |= set().union(*sc.tags.values())
    for tag in (
        "filter",
        "inner_join",
        "left_join",
        "full_join",
        "semi_join",
        "anti_join",
        "group_by",
        "global_agg",
        "having",
        "distinct",
        "union_all",
        "union",
        "window_rownum",
        "window_rank",
        "window_agg",
        "window_dedup",
        "subquery",
        "cte",
        "dt_over_dt",
        "rejected",
        "twin",
        "picked_map",
    ):
        assert tag in seen, tag


@settings(max_examples=40, deadline=None, database=None)
@given(sc=scenarios(faults=True))
def test_hypothesis_scenarios_are_valid(sc: Scenario) -> None:
    _check(sc)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.scn")), ids=lambda p: p.stem)
def test_corpus_files_parse(path: Path) -> None:
    sc = parse_scenario(path.read_text(), path.stem)
    assert sc.steps and sc.dynamic_tables


def test_quick_scenarios_cover_every_shape() -> None:
    from tests.differential.generate import QUICK_GROUPS, SHAPE_TAGS, quick_scenarios

    quick = quick_scenarios()
    assert [q.to_text() for q in quick] == [q.to_text() for q in quick_scenarios()]  # fixed
    assert sorted(s for g in QUICK_GROUPS for s in g) == sorted(SHAPES)
    for sc in quick:
        _check(sc)
        tags = set().union(*sc.tags.values())
        for shape in (sc.shape or "").split("+"):
            assert tags & SHAPE_TAGS.get(shape, {shape}), shape


def test_an_aggregate_filter_goes_on_the_call_not_on_a_cast_around_it() -> None:
    """Spark rejects ``CAST(EVERY(p) AS INT) FILTER (WHERE q)`` (a generator error seen in
    a long fuzz run): the FILTER belongs inside, on the aggregate call."""
    scope = [Ref("t.k", INT, key=True), Ref("t.x", DEC), Ref("t.s", STR)]
    casts = 0
    for seed in range(3000):
        sql, _, _ = QueryGen(RandomChooser(seed), []).agg_call(scope, set())
        if "FILTER" in sql:
            assert ") FILTER (WHERE " in sql and not sql.endswith(" AS INT) FILTER")
            if sql.startswith("CAST("):
                assert sql.endswith(" AS INT)") and ") FILTER (WHERE " in sql
                parse_query(f"SELECT {sql} AS v FROM t")
                casts += 1
    assert casts > 0  # the case under test came up


def test_struct_columns_are_made_and_read_whole_and_by_field() -> None:
    """A nested column (a source of past bugs: field names, VALUES rows of one struct)
    is in the tables, selected whole and read by field in expressions."""
    texts = [scenario_from_seed(seed, "filter").to_text() for seed in range(60)]
    assert any("st STRUCT<a: INT, b: STRING>" in t for t in texts)
    assert any(re.search(r"\bl\d+\.st\.[ab]\b", t) for t in texts)
    assert any(re.search(r"\bl\d+\.st AS c\d+", t) for t in texts)


def test_some_scenarios_read_current_date_where_others_read_a_day_literal() -> None:
    """A scenario's tables read CURRENT_DATE in place of the day literal, all of them or
    none, and its other steps stay as the seed made them; in some, the clock moves on a
    day before a refresh that more changes follow."""
    reading = [
        sc
        for sc in map(scenario_from_seed, range(660000, 660200))
        if any("current_date()" in s.args[1] for s in sc.steps if s.op == "create_dt")
    ]
    assert reading
    for sc in reading:
        _check(sc)
        creates = [s.args[1] for s in sc.steps if s.op == "create_dt"]
        assert not any(DAY_LITERAL in q for q in creates)
        assert not any("current_date" in " ".join(s.args) for s in sc.steps if s.op != "create_dt")
