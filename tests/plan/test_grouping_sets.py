"""One GROUP BY per grouping set (plan/grouping_sets.py): pure sqlglot."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from dyntables.plan.grouping_sets import branch, expand


def _branches(sql: str) -> list[str]:
    select = sqlglot.parse_one(sql, read="spark")
    assert isinstance(select, exp.Select)
    expanded = expand(select.args["group"])
    assert expanded is not None
    sets, everything = expanded
    return [branch(select, keys, everything).sql("spark") for keys in sets]


def test_a_key_of_the_set_is_its_grouped_value_whatever_is_outside_the_set() -> None:
    """Spark matches ``coalesce(k, 0)`` to the grouping expression before its parts: in
    the set (coalesce(k, 0)) it is the key's value, not coalesce(NULL, 0)."""
    assert _branches(
        "SELECT k, coalesce(k, 0) AS c, COUNT(*) AS n FROM t "
        "GROUP BY GROUPING SETS ((k, coalesce(k, 0)), (coalesce(k, 0)), ())"
    ) == [
        "SELECT k, COALESCE(k, 0) AS c, COUNT(*) AS n FROM t GROUP BY k, COALESCE(k, 0)",
        "SELECT NULL, COALESCE(k, 0) AS c, COUNT(*) AS n FROM t GROUP BY COALESCE(k, 0)",
        "SELECT NULL, NULL AS c, COUNT(*) AS n FROM t GROUP BY '()'",
    ]
