"""Which of a dynamic table's columns a delta can carry as a MAP's entries (pure)."""

from __future__ import annotations

import pytest

from dyntables.plan.not_incremental import NotIncremental
from dyntables.refresh.planner import _map_outputs


def test_top_level_maps_of_groupable_entries_are_carried() -> None:
    fields = [
        ("k", "int"),
        ("attrs", "map<string,string>"),
        ("props", "map<int,struct<x:int,y:array<string>>>"),
    ]
    assert _map_outputs(fields) == [1, 2]


@pytest.mark.parametrize(
    "type_sql",
    ["map<string,map<string,int>>", "array<map<string,int>>", "struct<a:map<int,int>>"],
)
def test_a_map_whose_entries_spark_cannot_group_makes_the_query_full(type_sql: str) -> None:
    with pytest.raises(NotIncremental) as err:
        _map_outputs([("k", "int"), ("x", type_sql)])
    assert err.value.code == "MAP_COLUMN" and "column x" in err.value.detail
