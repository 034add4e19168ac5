"""How a plan reads a source's MAP columns, pure (no Spark): values at constant keys
scanned as columns, a MAP taken apart, held or passed on read as its entries, and a MAP
read otherwise left to a FULL refresh (plan/maps.py)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from dyntables.plan import map_values
from dyntables.plan.build import build_plan
from dyntables.plan.calls import picked_value
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import (
    Aggregate,
    Project,
    UnionAll,
    Window,
    scans,
    walk_post_order,
)
from tests.plan.test_build import SCHEMA, T0, scanned
from tests.plan.test_query import qualify


@pytest.mark.parametrize(
    ("sql", "map_outputs"),
    [
        # a MAP built from a source's MAP, not known to be one (no positions given)
        ("SELECT k, map_concat(m, map('z', 0)) AS mm FROM t0", ()),
        # a MAP built of one row's MAP where the table holds no MAP
        ("SELECT k, to_json(coalesce(MAX_BY(m, n), map('x', 0))) AS j FROM t0 GROUP BY k", ()),
        # an aggregate's or a window's MAP that is no one row's (a default of its own)
        ("SELECT k, collect_list(m) AS f FROM t0 GROUP BY k", ()),
        ("SELECT k, LAG(m, 1, map('a', 0)) OVER (PARTITION BY k ORDER BY n) AS p FROM t0", (1,)),
        # through a UNION ALL, then aggregated otherwise or ranked by (a window's ties told
        # apart by it), or built on one side only
        (
            "SELECT x.k, COUNT(DISTINCT x.m) AS f FROM (SELECT k, m FROM t0 UNION ALL "
            "SELECT k, m FROM t0) x GROUP BY x.k",
            (),
        ),
        (
            "SELECT u.k, to_json(u.m) AS j FROM (SELECT x.k, x.m FROM (SELECT k, m FROM t0 "
            "UNION ALL SELECT k, m FROM t0) x UNION ALL SELECT k, map('a', n) FROM t0) u",
            (),
        ),
        (
            "SELECT x.k, x.m['a'] AS a FROM (SELECT k, m FROM t0 UNION ALL "
            "SELECT k, map_concat(m, m) FROM t0) x",
            (),
        ),
        # built below the last projection, and read on its way up or passed on twice
        ("SELECT k, mm FROM (SELECT k, map('n', n) AS mm FROM t0) x WHERE mm['n'] > 1", (1,)),
        ("SELECT k, mm, mm AS m2 FROM (SELECT k, map('n', n) AS mm FROM t0) x", (1, 2)),
        # compared (Spark refuses it too)
        ("SELECT k FROM t0 WHERE m = map('a', 1)", ()),
    ],
)
def test_reading_a_map_column_whole_has_no_delta_rule(
    sql: str, map_outputs: tuple[int, ...]
) -> None:
    with pytest.raises(NotIncremental) as err:
        build_plan(sql, SCHEMA, qualify, map_outputs)
    assert err.value.code == "MAP_COLUMN"


@pytest.mark.parametrize(
    ("sql", "map_outputs", "carried"),
    [
        ("SELECT k, m FROM t0", (1,), [1]),
        ("SELECT * FROM t0 WHERE m IS NOT NULL", (), ["m"]),  # known a MAP from its source
        ("SELECT k, size(m) AS n, m AS mm FROM t0", (2,), [2]),
        ("WITH src AS (SELECT * FROM t0) SELECT k, m FROM src", (1,), [1]),
        ("SELECT t0.m, t1.s FROM t0 JOIN t1 ON t0.k = t1.k", (0,), [0]),
        ("SELECT k, m, ROW_NUMBER() OVER (PARTITION BY k ORDER BY n) AS r FROM t0", (1,), [1]),
        ("SELECT k, m FROM t0 UNION ALL SELECT k, map('s', s) FROM t1", (1,), [1]),
        ("SELECT k, map('n', n) AS a, map_concat(m, map('k', k)) AS b FROM t0", (1, 2), [1, 2]),
        ("SELECT k, map('total', SUM(n)) AS a FROM t0 GROUP BY k", (1,), [1]),
        # one row's MAP, an aggregate's or a window function's
        ("SELECT k, first(m) AS f FROM t0 GROUP BY k", (1,), [1]),
        ("SELECT k, MAX_BY(m, ts) AS f, COUNT(*) AS c FROM t0 GROUP BY k", (1,), [1]),
        ("SELECT MIN_BY(m, n) FILTER (WHERE z > 0) AS f FROM t0", (0,), [0]),
        ("SELECT k, LAST(m) IGNORE NULLS AS f FROM t0 GROUP BY k HAVING size(f) > 1", (1,), [1]),
        ("SELECT k, LAG(m) OVER (PARTITION BY k ORDER BY n) AS p, m FROM t0", (1, 2), [1, 2]),
        (
            "SELECT x.k, FIRST(x.m) AS f FROM (SELECT k, m FROM t0 UNION ALL "
            "SELECT k, m FROM t0) x GROUP BY x.k",
            (1,),
            [1],
        ),
        # ... and one the last projection builds of them
        ("SELECT k, coalesce(MAX_BY(m, n), map('x', 0)) AS f FROM t0 GROUP BY k", (1,), [1]),
        (
            "SELECT x.k, map_concat(x.m, map('z', 1)) AS f FROM (SELECT k, m FROM t0 "
            "UNION ALL SELECT k, m FROM t0) x",
            (1,),
            [1],
        ),
        # built below the last projection (a CTE's) and passed on to it as it is
        ("WITH x AS (SELECT k, map('n', n) AS mm FROM t0) SELECT * FROM x", (1,), [1]),
        (
            "SELECT y.k, y.mm FROM (SELECT x.k, x.mm FROM (SELECT k, map_concat(m, m) AS mm "
            "FROM t0) x WHERE x.k > 1) y JOIN t1 ON y.k = t1.k",
            (1,),
            [1],
        ),
    ],
)
def test_a_map_the_table_holds_is_carried_as_its_entries(
    sql: str, map_outputs: tuple[int, ...], carried: list[int | str]
) -> None:
    """A MAP passed on whole to the table, or built by the query's last projection, is
    carried as its entries, which Spark can group: no scan reads the MAP itself."""
    plan = build_plan(sql, SCHEMA, qualify, map_outputs)
    positions = [c if isinstance(c, int) else plan.output_names.index(c) for c in carried]
    assert sorted(plan.entries) == sorted(plan.root.columns[i] for i in positions)
    for scan in scans(plan.root):
        assert "m" not in scan.source_columns
    defined: dict[str, exp.Expr] = {}  # what each name is, one row's value of another
    for n in walk_post_order(plan.root):
        if isinstance(n, Project):
            defined.update(zip(n.out, n.exprs, strict=True))
        elif isinstance(n, Aggregate):
            defined.update((a.column, a.arg) for a in n.aggs if a.arg is not None)
        elif isinstance(n, Window):
            defined.update(zip(n.func_columns, n.funcs, strict=True))
        elif isinstance(n, UnionAll) and isinstance(n.inputs[0], Project):
            defined.update(zip(n.out, n.inputs[0].exprs, strict=True))
    top = [plan.root] if isinstance(plan.root, Project) else list(plan.root.inputs)
    for p in top:
        assert isinstance(p, Project)
        for i in positions:
            e, seen = p.exprs[i], set()
            while isinstance(e, exp.Column) and e.name in defined.keys() - seen:
                seen.add(e.name)  # passed on as it is (maybe by its own name)
                e = defined[e.name]
                e = picked.this if (picked := picked_value(e)) is not None else e
            assert e.sql("spark").startswith("MAP_ENTRIES(") or e.name.endswith("__entries")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k, m['a'] AS a FROM (SELECT k, m FROM t0 UNION ALL SELECT k, m FROM t0) x",
        "SELECT x.k, size(x.m) AS n, mk, v FROM (SELECT k, m FROM t0 UNION ALL "
        "SELECT k, m FROM t0 WHERE k > 1) x LATERAL VIEW explode(x.m) g AS mk, v "
        "WHERE x.m['b'] > 0",
        "SELECT x.m['a'] AS a, COUNT(*) AS c FROM (SELECT k, m FROM t0 UNION ALL "
        "SELECT k, m FROM t0) x GROUP BY x.m['a']",
        "SELECT x.k, t1.s FROM (SELECT * FROM t0 UNION ALL SELECT * FROM t0) x "
        "JOIN t1 ON x.m['a'] = t1.k",
        "SELECT x.k, ROW_NUMBER() OVER (PARTITION BY x.m['b'] ORDER BY x.k) AS r "
        "FROM (SELECT k, m FROM t0 UNION ALL SELECT k, m FROM t0) x",
        "SELECT u.k, u.m['a'] AS a FROM (SELECT k, m FROM (SELECT k, m FROM t0 UNION ALL "
        "SELECT k, m FROM t0) x UNION ALL SELECT k, m FROM t0) u",
    ],
)
def test_a_map_passed_through_a_union_all_is_passed_as_its_entries(sql: str) -> None:
    """A UNION reads its inputs by position: what is read of a MAP above it cannot
    follow it through as it follows projections. Each input passes on the MAP's
    entries instead, and the readers above read ``map_from_entries`` of them."""
    plan = build_plan(sql, SCHEMA, qualify)
    for scan in scans(plan.root):
        if scan.table == T0:
            assert "m" not in scan.source_columns
            assert map_values.entries_column("m") in scan.source_columns
    for union in (n for n in walk_post_order(plan.root) if isinstance(n, UnionAll)):
        assert {len(c.columns) for c in union.inputs} == {len(union.columns)}
    assert "this=map_from_entries" in repr(plan.root)


def test_values_at_constant_keys_of_a_map_are_scanned_as_columns() -> None:
    """Spark cannot group a MAP, but a value at a constant key is a column like any
    other (helper-25: a staging model's ``attrs['src']`` made it FULL)."""
    a, b = (
        map_values.value_column("m", exp.Literal.string("a")),
        map_values.value_column("m", exp.Literal.string("b")),
    )
    sql = "SELECT m['a'] AS a, SUM(m['b']) AS b FROM t0 WHERE m['a'] > 0 GROUP BY m['a']"
    assert scanned(sql) == [("t0", (a, b))]
    assert map_values.base_column(a) == "m" and map_values.base_column("k") == "k"
    assert map_values.source_sql(a) == "`m`['a']" and map_values.source_sql("k") == "`k`"
    # a self-join reads the value once per scan, under one name the capture shares
    joined = "SELECT x.m['a'] AS a, y.m['a'] AS b FROM t0 AS x JOIN t0 AS y ON x.k = y.k"
    assert scanned(joined) == [("t0", ("k", a)), ("t0", ("k", a))]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k, size(m) AS n, map_keys(m) AS ks, to_json(m) AS j FROM t0",
        "SELECT m[s] AS v FROM t0, t1",
        "SELECT k, mk, mv FROM t0 LATERAL VIEW OUTER explode(m) g AS mk, mv",
        "SELECT k, try_element_at(m, 'a') AS a, cardinality(m) AS c FROM t0",
    ],
)
def test_a_map_taken_apart_is_scanned_as_its_entries(sql: str) -> None:
    """A call that takes a MAP apart reads it rebuilt from its entries, which Spark can
    group, in the MAP's own order (map_keys and to_json show it)."""
    plan = build_plan(sql, SCHEMA, qualify)
    entries = map_values.entries_column("m")
    assert entries in scans(plan.root)[0].source_columns
    assert "m" not in scans(plan.root)[0].source_columns
    assert "this=map_from_entries" in repr(plan.root)
    assert map_values.base_column(entries) == "m"
    assert map_values.source_sql(entries) == "MAP_ENTRIES(`m`)"


def test_the_value_type_of_a_map_type() -> None:
    assert map_values.value_type("map<string,decimal(10,2)>") == "decimal(10,2)"
    assert map_values.value_type("map<string,struct<a:int,b:map<int,int>>>") == (
        "struct<a:int,b:map<int,int>>"
    )
    assert map_values.value_type("array<map<int,int>>") is None


@pytest.mark.parametrize(
    "sql",
    [
        "WITH src AS (SELECT * FROM t0) SELECT k, m['a'] AS a, size(m) AS n FROM src",
        "SELECT y.k, y.mm['a'] AS a FROM (SELECT x.k, x.m AS mm FROM (SELECT k, m FROM t0) x) y",
        "WITH src AS (SELECT k, m FROM t0) SELECT a.k, a.m['a'] AS x, b.m['b'] AS y "
        "FROM src a JOIN src b ON a.k = b.k",
        "SELECT k, ROW_NUMBER() OVER (PARTITION BY m['a'] ORDER BY k) AS r FROM (SELECT * FROM t0) x",
    ],
)
def test_a_map_passed_on_by_a_projection_is_read_as_what_is_read_of_it(sql: str) -> None:
    """A CTE's ``SELECT *`` (a staging model's usual first step) passes a MAP on whole:
    the projections pass on what is read of it instead, and the MAP no more."""
    plan = build_plan(sql, SCHEMA, qualify)
    for scan in scans(plan.root):
        assert "m" not in scan.source_columns
        assert any(map_values.base_column(c) == "m" != c for c in scan.source_columns)
    projected = [n for n in walk_post_order(plan.root) if isinstance(n, Project)]
    read = {c for s in scans(plan.root) for c in s.out}
    for p in projected[:-1]:  # each passes on only what its input has
        below = {c for n in walk_post_order(p.child) for c in n.columns}
        assert {e.name for e in p.exprs if isinstance(e, exp.Column)} <= below | read
