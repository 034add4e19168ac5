"""A LATERAL VIEW's columns are typed as Spark types them (pure, no Spark): the
element of an array, a map's key and value, posexplode's INT position, a stack's
columns; what is computed from them follows. sqlglot alone gives the array's type."""

from __future__ import annotations

import pytest
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify as sg_qualify

from dyntables.plan.annotate import annotated
from dyntables.plan.build import build_plan
from dyntables.plan.query import parse_query
from dyntables.sql.tokens import TableName
from tests.plan.test_query import qualify

T0 = TableName(("lakehouse", "public", "t0"))
T1 = TableName(("lakehouse", "public", "t1"))
COLUMNS = {
    "k": "int",
    "n": "int",
    "s": "string",
    "a": "array<int>",
    "aa": "array<array<bigint>>",
    "m": "map<string,decimal(10,2)>",
    "r": "array<struct<x: int, y: string>>",
}
SG_SCHEMA: dict[str, object] = {"t0": COLUMNS}
SCHEMA = {T0: list(COLUMNS.items()), T1: [("k", "int"), ("s", "string")]}


def _types(sql: str) -> dict[str, str]:
    tree = sg_qualify(parse_query(sql), schema=SG_SCHEMA, dialect="spark")
    typed = annotated(tree, SG_SCHEMA)
    assert isinstance(typed, exp.Query)
    return {s.alias_or_name: s.type.sql("spark") for s in typed.selects if s.type}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # a LATERAL VIEW's columns
        ("explode(a) g AS v", {"v": "INT"}),
        ("explode_outer(a) g AS v", {"v": "INT"}),
        ("explode(sequence(0, n)) g AS v", {"v": "INT"}),
        ("explode(split(s, ',')) g AS v", {"v": "STRING"}),
        ("posexplode(a) g AS p, v", {"p": "INT", "v": "INT"}),
        ("explode(m) g AS x, y", {"x": "STRING", "y": "DECIMAL(10, 2)"}),
        ("posexplode_outer(m) g AS p, x, y", {"p": "INT", "x": "STRING", "y": "DECIMAL(10, 2)"}),
        ("inline(r) g AS x, y", {"x": "INT", "y": "STRING"}),
        ("explode(r) g AS v", {"v": "STRUCT<x: INT, y: STRING>"}),
        ("stack(2, k, s, n, 'z') g AS x, y", {"x": "INT", "y": "STRING"}),
        ("json_tuple(s, 'a', 'b') g AS x, y", {"x": "STRING", "y": "STRING"}),
        # a derived table's generator of several columns
        ("(SELECT posexplode(a) AS (p, v) FROM t0) g", {"p": "INT", "v": "INT"}),
        ("(SELECT explode(m) AS (x, y) FROM t0) g", {"x": "STRING", "y": "DECIMAL(10, 2)"}),
        ("(SELECT inline(r) AS (x, y) FROM t0) g", {"x": "INT", "y": "STRING"}),
        ("(SELECT stack(2, k, s, n, 'z') AS (x, y) FROM t0) g", {"x": "INT", "y": "STRING"}),
    ],
)
def test_a_generators_columns_take_the_generated_types(
    query: str, expected: dict[str, str]
) -> None:
    names = ", ".join(f"g.{c}" for c in expected)
    source = query if query.startswith("(") else f"t0 LATERAL VIEW {query}"
    assert _types(f"SELECT {names} FROM {source}") == expected


def test_what_is_computed_from_a_lateral_column_follows_its_type() -> None:
    types = _types(
        "SELECT u.v, u.w, u.big FROM (SELECT g.v, g.v + 1 AS w, h.e * 2 AS big "
        "FROM t0 LATERAL VIEW explode(a) g AS v LATERAL VIEW explode(aa) f AS arr "
        "LATERAL VIEW explode(f.arr) h AS e) u"
    )
    assert types == {"v": "INT", "w": "INT", "big": "BIGINT"}


def test_plain_calls_spark_types_are_typed_and_what_reads_them_follows() -> None:
    types = _types(
        "SELECT pmod(k, 4) AS p, pmod(CAST(k AS BIGINT), 4) AS pb, hash(s) AS h, "
        "pmod(CAST(k AS DOUBLE), 4) AS pd, g.v, u.t "
        "FROM (SELECT date_trunc('MONTH', CAST(s AS TIMESTAMP)) AS t FROM t0) u, t0 "
        "LATERAL VIEW explode(sequence(0, pmod(k, 4) - 1)) g AS v"
    )
    assert types == {
        "p": "INT",
        "pb": "BIGINT",
        "h": "INT",
        "pd": "UNKNOWN",
        "v": "INT",
        "t": "TIMESTAMP",
    }


def test_a_time_buckets_bounds_have_its_time_columns_type() -> None:
    schema: dict[str, object] = {"t": {"ts": "timestamp", "tn": "timestamp_ntz", "d": "date"}}
    tree = sg_qualify(
        parse_query(
            "SELECT window(ts, '1 hour').end AS a, window(tn, '1 hour').start AS b, "
            "window(d, '1 day').start AS c FROM t"
        ),
        schema=schema,
        dialect="spark",
    )
    typed = annotated(tree, schema)
    assert [s.type.sql("spark") for s in typed.selects] == [
        "TIMESTAMP",
        "TIMESTAMP_NTZ",
        "TIMESTAMP",
    ]


def test_a_column_a_generator_does_not_type_is_unknown_not_the_arguments_type() -> None:
    # Spark refuses both (explode of an INT; a stack column of an INT and a STRING);
    # sqlglot alone calls the first INT
    assert _types("SELECT g.x FROM t0 LATERAL VIEW explode(k) g AS x") == {"x": "UNKNOWN"}
    types = _types("SELECT g.x, g.y FROM t0 LATERAL VIEW stack(2, k, s, n, k) g AS x, y")
    assert types == {"x": "UNKNOWN", "y": "UNKNOWN"}


def test_a_grouping_set_without_a_lateral_column_fills_it_with_a_null_of_its_type() -> None:
    plan = build_plan(
        "SELECT t0.k, g.v, COUNT(*) AS c FROM t0 LATERAL VIEW explode(t0.a) g AS v "
        "GROUP BY GROUPING SETS ((t0.k), (g.v))",
        SCHEMA,
        qualify,
    )
    nulls = [
        e.to.sql("spark") for p in plan.root.inputs for e in p.exprs if isinstance(e, exp.Cast)
    ]
    assert nulls == ["INT", "INT"]  # v's was ARRAY<INT>: Spark refused the UNION


@pytest.mark.parametrize(
    "query",
    [
        "SELECT t0.k, g.v FROM t0 LATERAL VIEW explode(sequence(0, t0.n)) g AS v "
        "WHERE g.v IN (SELECT k FROM t1)",
        "SELECT t0.k, g.x FROM t0 LATERAL VIEW stack(2, t0.k, t0.s, t0.n, 'z') g AS x, y "
        "WHERE g.x NOT IN (SELECT k FROM t1 WHERE k IS NOT NULL) AND g.y IN (SELECT s FROM t1)",
        "SELECT t0.k, g.v, EXISTS (SELECT 1 FROM t1 WHERE t1.k = g.v + 1) AS has_next "
        "FROM t0 LATERAL VIEW explode(t0.a) g AS v",
        "SELECT x.k, x.v FROM (SELECT t0.k, posexplode(t0.a) AS (p, v) FROM t0) x "
        "WHERE x.p IN (SELECT k FROM t1)",
    ],
)
def test_a_subquery_keyed_by_a_lateral_column_keeps_its_rule(query: str) -> None:
    build_plan(query, SCHEMA, qualify)  # KEY_TYPES "cannot tell the type" before


def test_a_maps_value_at_a_key_takes_the_maps_value_type() -> None:
    """sqlglot types an array's element, not a map's value: an IN over ``m['a']`` was
    refused (KEY_TYPES) for a type it has."""
    types = _types(
        "SELECT m['a'] AS v, element_at(m, s) AS w, try_element_at(m, 'b') AS x, a[0] AS y FROM t0"
    )
    assert types == {
        "v": "DECIMAL(10, 2)",
        "w": "DECIMAL(10, 2)",
        "x": "DECIMAL(10, 2)",
        "y": "INT",
    }
    build_plan(
        "SELECT k FROM t0 WHERE m['a'] IN (SELECT CAST(k AS DECIMAL(10,2)) FROM t1)",
        SCHEMA,
        qualify,
    )
