"""Name resolution of a DT's query, pure (no Spark): which tables it reads and what the
pinned query means, by Spark's scoping rules for CTEs and qualified names."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dyntables.catalog.definition import SourceVersion
from dyntables.errors import UnsupportedQueryError
from dyntables.plan.query import (
    clock_calls,
    current_date_unclear,
    names_beyond_tables,
    parse_query,
    parse_rows,
    pin_sources,
    random_samples,
    reads_context,
    refs_read,
    scoped_names,
    semi_join_fields_as_dots,
    session_calls,
    source_tables,
)
from dyntables.sql.tokens import TableName


def qualify(name: TableName) -> TableName:
    parts = name.parts
    if len(parts) == 1:
        return TableName(("lakehouse", "public", parts[0]))
    if len(parts) == 2:
        return TableName(("lakehouse", *parts))
    return name


def sources(sql: str) -> list[str]:
    return [str(t) for t in source_tables(parse_query(sql), qualify)]


def pinned(sql: str) -> str:
    tree = parse_query(sql)
    return pin_sources(tree, qualify, {t: 7 for t in source_tables(tree, qualify)}).sql("spark")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # inside its own body a CTE's name is the table (Spark resolves it so)
        ("WITH t0 AS (SELECT k FROM t0 WHERE k > 1) SELECT k FROM t0", ["t0"]),
        # a CTE inside a FROM subquery does not hide a same-named table outside it
        (
            "SELECT q.k FROM (WITH t1 AS (SELECT k FROM t0) SELECT k FROM t1) AS q JOIN t1 ON q.k = t1.k",
            ["t0", "t1"],
        ),
        # later CTEs see earlier ones; an inner WITH shadows an outer one
        ("WITH a AS (SELECT k FROM t0), b AS (SELECT k FROM a) SELECT * FROM b", ["t0"]),
        (
            "WITH a AS (SELECT k FROM t0) SELECT * FROM (WITH a AS (SELECT k FROM t1) SELECT k FROM a) AS x",
            ["t0", "t1"],
        ),
        (
            "SELECT * FROM t2 WHERE EXISTS (WITH c AS (SELECT 1 FROM t3) SELECT 1 FROM c)",
            ["t2", "t3"],
        ),
        # a table function is no table
        ("SELECT r.id, t0.k FROM range(3) AS r JOIN t0 ON r.id = t0.k", ["t0"]),
        # a qualified name is never a CTE
        ("WITH t0 AS (SELECT 1 AS k) SELECT * FROM public.t0", ["t0"]),
    ],
)
def test_source_tables_follow_cte_scopes(sql: str, expected: list[str]) -> None:
    assert sources(sql) == [f"lakehouse.public.{t}" for t in expected]


def test_pinned_nested_ctes_keep_their_meaning_when_hoisted() -> None:
    """sqlglot's Spark generator hoists nested WITHs to the top: unique CTE names make
    that harmless (no duplicate names, no CTE shadowing the outer table)."""
    sql = pinned(
        "SELECT a.k AS ak, b.k AS bk FROM (WITH w AS (SELECT k FROM t0) SELECT k FROM w) AS a "
        "FULL JOIN (WITH w AS (SELECT k FROM t1) SELECT k FROM w) AS b ON a.k = b.k"
    )
    assert sql.startswith(
        "WITH _cte0_w AS (SELECT k FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS t0), _cte1_w AS"
    )
    assert "FROM _cte0_w AS w" in sql and "FROM _cte1_w AS w" in sql
    shadow = pinned(
        "SELECT q.k AS qk, t1.k AS k1 FROM (WITH t1 AS (SELECT k FROM t0) SELECT k FROM t1) AS q RIGHT JOIN t1 ON q.k = t1.k"
    )
    assert "RIGHT JOIN `lakehouse`.`public`.`t1` VERSION AS OF 7 AS t1" in shadow


def test_pinned_self_named_cte_reads_the_table() -> None:
    assert pinned("WITH t0 AS (SELECT k FROM t0) SELECT k FROM t0") == (
        "WITH _cte0_t0 AS (SELECT k FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS t0) SELECT k FROM _cte0_t0 AS t0"
    )


def test_schema_qualified_columns_follow_the_pinned_alias() -> None:
    assert pinned("SELECT public.t0.k, lakehouse.public.t0.n, t0.x FROM public.t0") == (
        "SELECT t0.k, t0.n, t0.x FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS t0"
    )


def test_cte_names_never_clash_with_names_in_the_query() -> None:
    sql = scoped_names(
        parse_query("WITH w AS (SELECT _cte0_w FROM t0) SELECT * FROM w"), qualify
    ).sql("spark")
    assert sql == "WITH _cte1_w AS (SELECT _cte0_w FROM t0 AS t0) SELECT * FROM _cte1_w AS w"


def test_a_hint_names_a_relation_not_a_table_to_pin() -> None:
    """Pinning the table inside ``BROADCAST(t1)`` gave Spark a syntax error at CREATE."""
    assert sources("SELECT /*+ BROADCAST(t1) */ t0.k FROM t0 JOIN t1 ON t0.k = t1.k") == [
        "lakehouse.public.t0",
        "lakehouse.public.t1",
    ]
    assert pinned("SELECT /*+ BROADCAST(t1) */ t0.k FROM t0 JOIN t1 ON t0.k = t1.k") == (
        "SELECT /*+ BROADCAST(t1) */ t0.k FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS t0 "
        "JOIN `lakehouse`.`public`.`t1` VERSION AS OF 7 AS t1 ON t0.k = t1.k"
    )


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        # sqlglot writes these back as PERCENTILE_APPROX
        (
            "SELECT k, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS p FROM t GROUP BY k",
            "PERCENTILE(x, p)",
        ),
        ("SELECT percentile_disc(0.2) WITHIN GROUP (ORDER BY v DESC) AS p FROM t", "WITHIN GROUP"),
        # ... drops PERCENTILE's frequency at parse
        ("SELECT percentile(v, 0.5, n) AS p FROM t", "PERCENTILE with more than 2 arguments"),
        (
            "SELECT k FROM t WHERE v > (SELECT percentile(v, array(0.5, 0.9), 2)[0] FROM t)",
            "PERCENTILE",
        ),
        # ... writes TO_CHAR(x, fmt) back as CAST(x AS STRING)
        ("SELECT to_char(v, '999.99') AS s FROM t", "'format' is not supported"),
        # ... groups operators otherwise than Spark: & before ^ before |; || with + and -;
        # a comparison as the operand of LIKE, RLIKE, IN, BETWEEN (found by a helper's
        # round trips of 864 statements through Spark)
        ("SELECT k | 3 & 4 AS c FROM t", "precedence"),
        ("SELECT k ^ 3 & 1 AS c FROM t", "precedence"),
        ("SELECT ~k | 3 ^ 1 AS c FROM t", "precedence"),
        ("SELECT length('1' || k + k) AS c FROM t", "precedence"),
        ("SELECT s || k - 1 AS c FROM t", "precedence"),
        ("SELECT s = 'a' LIKE 't%' AS c FROM t", "precedence"),
        ("SELECT k FROM t WHERE s LIKE 'a%' = false", "precedence"),
        ("SELECT k = 1 RLIKE 'tr' AS c FROM t", "precedence"),
        ("SELECT s = 'a' NOT LIKE 't%' AS c FROM t", "precedence"),
        ("SELECT k FROM t WHERE k > 1 BETWEEN false AND true", "precedence"),
        # ... writes INTERVAL 1 DAY 12 HOURS back as a sum, which Spark refuses as a
        # frame's bound (a helper's sweep)
        (
            "SELECT k, COUNT(*) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN "
            "INTERVAL 1 DAY 12 HOURS PRECEDING AND CURRENT ROW) AS c FROM t",
            "INTERVAL '1 12' DAY TO HOUR",
        ),
    ],
)
def test_a_query_sqlglot_would_write_back_otherwise_is_refused(sql: str, says: str) -> None:
    with pytest.raises(UnsupportedQueryError) as err:
        parse_query(sql)
    assert says in err.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT percentile(v, 0.5) AS p, percentile_approx(v, 0.5, 100) AS a FROM t",
        "SELECT k, first(v, true) AS f, date_format(d, 'yyyy') AS y FROM t GROUP BY k, d",
        "SELECT 'percentile(a, b, c)' AS s, percentile(v, 0.25) AS p FROM t",
    ],
)
def test_what_sqlglot_writes_back_as_written_is_accepted(sql: str) -> None:
    parse_query(sql)


@pytest.mark.parametrize(
    ("sql", "written"),
    [
        ("SELECT first(v, true) FILTER (WHERE v > 1) AS f FROM t", "FILTER(WHERE v > 1) IGNORE"),
        (
            "SELECT last(v) FILTER (WHERE v > 1) IGNORE NULLS AS f FROM t",
            "FILTER(WHERE v > 1) IGNORE",
        ),
    ],
)
def test_a_nulls_option_is_written_after_the_filter_as_spark_reads_it(
    sql: str, written: str
) -> None:
    """sqlglot read ``first(v, true) FILTER (...)`` as a FILTER around ``FIRST(v) IGNORE
    NULLS`` and wrote it back so, which Spark's grammar does not parse."""
    assert written in parse_query(sql).sql("spark")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT * FROM t0 PIVOT (SUM(n) FOR k IN (1, 2))",
            "SELECT * FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS t0 PIVOT(SUM(n) FOR k IN (1, 2))",
        ),
        (
            "SELECT * FROM t0 UNPIVOT (v FOR c IN (k, n))",
            "SELECT * FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS t0 UNPIVOT(v FOR c IN (k, n))",
        ),
        (
            "SELECT a FROM t0 AS x(a, b)",
            "SELECT a FROM `lakehouse`.`public`.`t0` VERSION AS OF 7 AS x(a, b)",
        ),
        # Spark's grammar wants a table's sample after its version: over a subquery
        (
            "SELECT k FROM t0 TABLESAMPLE (50 PERCENT)",
            "SELECT k FROM (SELECT * FROM `lakehouse`.`public`.`t0` VERSION AS OF 7) TABLESAMPLE (50 PERCENT) AS t0",
        ),
    ],
)
def test_pinned_reference_keeps_what_it_says_besides_its_name(sql: str, expected: str) -> None:
    """A pivot, a sample or column aliases on a table reference used to be dropped with
    the name it replaced: the dynamic table held the plain table's rows."""
    assert pinned(sql) == expected


@pytest.mark.parametrize(
    ("sample", "drawn"),
    [
        ("TABLESAMPLE (50 PERCENT)", "TABLESAMPLE (50 PERCENT)"),
        ("TABLESAMPLE (0.5 PERCENT) REPEATABLE (7)", "TABLESAMPLE (0.5 PERCENT) REPEATABLE (7)"),
        ("TABLESAMPLE (BUCKET 3 OUT OF 10)", "TABLESAMPLE (BUCKET 3 OUT OF 10)"),
        # every row, none, or the first rows: no draw
        ("TABLESAMPLE (100 PERCENT)", None),
        ("TABLESAMPLE (0 PERCENT)", None),
        ("TABLESAMPLE (BUCKET 4 OUT OF 4)", None),
        ("TABLESAMPLE (2 ROWS)", None),
    ],
)
def test_a_sample_that_draws_rows_at_random_is_named_as_written(
    sample: str, drawn: str | None
) -> None:
    tree = parse_query(f"SELECT k FROM t0 {sample} JOIN t1 ON t0.k = t1.k")
    assert random_samples(tree) == ([drawn] if drawn else [])


def test_a_seed_no_draw_reads_is_dropped() -> None:
    """sqlglot writes REPEATABLE back as SEED, which Spark does not read: CREATE of a
    100 PERCENT sample with a seed failed with a syntax error."""
    sql = parse_query("SELECT k FROM t0 TABLESAMPLE (100 PERCENT) REPEATABLE (3)").sql("spark")
    assert sql == "SELECT k FROM t0 TABLESAMPLE (100 PERCENT)"


def test_pinned_unwritten_source_keeps_its_pivot() -> None:
    tree = parse_query("SELECT * FROM t0 AS x(a, b) PIVOT (SUM(b) FOR a IN (1))")
    sql = pin_sources(tree, qualify, {t: None for t in source_tables(tree, qualify)}).sql("spark")
    assert sql == (
        "SELECT * FROM (SELECT * FROM `lakehouse`.`public`.`t0` WHERE _pos < 0) "
        "AS x(a, b) PIVOT(SUM(b) FOR a IN (1))"
    )


def test_unwritten_source_with_columns_named_like_metadata_columns() -> None:
    """A table's own ``_pos`` hides Iceberg's row position: filtering on it would read
    the rows of a commit racing with the refresh whose ``_pos`` is negative. The next
    metadata column serves; with all hidden, the partition id."""
    tree = parse_query("SELECT * FROM t0 JOIN t1 USING (k) JOIN t2 USING (k)")
    t0, t1, t2 = source_tables(tree, qualify)
    shadowed = {t1: {"_pos"}, t2: {"_pos", "_spec_id", "_file"}}
    sql = pin_sources(tree, qualify, {t0: None, t1: None, t2: None}, shadowed=shadowed)
    text = sql.sql("spark")
    assert "`t0` WHERE _pos < 0" in text
    assert "`t1` WHERE _spec_id < 0" in text
    assert "`t2` WHERE SPARK_PARTITION_ID() < 0" in text


@pytest.mark.parametrize(
    "call",
    [
        "log10(x)",
        "to_date(s, 'yyyy-MM-dd')",
        "to_timestamp(b)",
        "date_format(d, 'y')",
        "date_trunc(u, ts)",
        "trunc(d, 'Q')",
        "get_json_object(j, 'a')",
        "regexp_extract(s, '(a)', -1)",
        "unix_date(d)",
        "date_sub(d, '1')",
        "current_catalog()",
    ],
)
def test_calls_sqlglot_writes_back_otherwise_are_kept_as_written(call: str) -> None:
    """Each of these came back from sqlglot with another value in Spark (see
    query._PROTECTED_TYPES)."""
    sql = parse_query(f"SELECT {call} AS v FROM t0").sql("spark")
    assert sql.lower() == f"SELECT {call} AS v FROM t0".lower()


def test_a_kept_call_inside_another_is_restored_too() -> None:
    """The fuzz (seed 202055): restoring the outer call as a new node left the inner one
    under its placeholder name, which Spark could not resolve."""
    sql = parse_query(
        "SELECT trunc(to_date(TIMESTAMP '2024-01-31 23:30:00'), 'MM') AS v FROM t0"
    ).sql("spark")
    assert "dyntables" not in sql.lower() and "TRUNC(TO_DATE(" in sql


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a + b * c, a * b + c, a - b - c, a || b || c, k + 1 || 'a' FROM t",
        "SELECT a & b | c, a & b ^ c, a ^ b | c, (a | b) & c, a | (b & c), ~k | 1 FROM t",
        "SELECT a = b = c, a = b + c, a + b = c, a <=> b | c, a DIV b + c FROM t",
        "SELECT s LIKE 'a' || 'b', a + b LIKE c, NOT a = b, s = (a LIKE b) FROM t",
        "SELECT (s LIKE 'a%') = false, a = b IS NULL, a = b AND c LIKE d FROM t",
    ],
)
def test_operators_grouped_as_spark_groups_them_are_kept(sql: str) -> None:
    parse_query(sql)


def test_a_struct_field_is_named_after_the_key_it_extracts() -> None:
    """Spark names ``struct(st['g'])``'s field g; sqlglot's parser names it col1."""
    sql = parse_query(
        "SELECT to_json(struct(st['g'], m['x'], a[0], st['g'] AS col9)) AS j FROM t"
    ).sql("spark")
    assert "STRUCT(st['g'] AS g, m['x'] AS x, a[0] AS col3, st['g'] AS col9)" in sql


def test_rows_written_by_the_package_read_back_keep_their_named_struct() -> None:
    """A VALUES row of one ``STRUCT(1 AS f)`` is the row's columns to Spark, and that is
    how sqlglot's Spark parser would have a rows-of-literals relation written back."""
    rows = "VALUES (NAMED_STRUCT('f', 1)), (NAMED_STRUCT('f', 2))"
    assert "STRUCT(1 AS f)" in sqlglot.parse_one(rows, read="spark").sql("spark")
    assert parse_rows(rows).sql("spark") == rows


def test_array_size_is_not_written_back_as_size() -> None:
    """sqlglot reads ``array_size(a)`` as ``size(a)``, which Spark answers -1 (not NULL)
    over a NULL array; ``window(...)`` does not parse under its own name."""
    sql = parse_query("SELECT array_size(a) AS n, size(a) AS m, window(ts, '1 hour') AS w FROM t0")
    assert (
        sql.sql("spark")
        == "SELECT ARRAY_SIZE(a) AS n, SIZE(a) AS m, WINDOW(ts, '1 hour') AS w FROM t0"
    )


def test_the_branches_and_tags_a_query_reads_by_name() -> None:
    query = parse_query(
        "SELECT a.k FROM t0 VERSION AS OF 'b' AS a JOIN t0 VERSION AS OF 'v1' AS c ON a.k = c.k "
        "JOIN t1 VERSION AS OF 123 AS d ON a.k = d.k "
        "JOIN t1 TIMESTAMP AS OF '2024-01-01' AS e ON a.k = e.k "
        "WHERE a.k IN (WITH t0 AS (SELECT 1 AS k) SELECT k FROM t0)"
    )
    t0 = TableName(("lakehouse", "public", "t0"))
    assert refs_read(query, qualify) == {t0: frozenset({"b", "v1"})}


def test_a_ref_or_metadata_table_named_as_a_table_is_found() -> None:
    query = parse_query("SELECT k FROM lakehouse.public.t0.branch_b JOIN t1 USING (k)")
    assert names_beyond_tables(query) == ["lakehouse.public.t0.branch_b"]
    assert names_beyond_tables(parse_query("SELECT k FROM lakehouse.public.t0")) == []


def test_a_source_version_keeps_its_refs_through_its_properties() -> None:
    version = SourceVersion(7, "u", (("b", 9), ("gone", None)))
    assert SourceVersion.from_json(version.to_json()) == version
    assert SourceVersion.from_json({"snapshot": 7, "uuid": "u"}) == SourceVersion(7, "u")
    assert version != SourceVersion(7, "u", (("b", 10), ("gone", None)))


def test_a_branch_read_by_name_is_pinned_at_the_snapshot_recorded_for_it() -> None:
    tree = parse_query("SELECT k FROM t0 VERSION AS OF 'b' JOIN t0 VERSION AS OF 'gone' USING (k)")
    t0 = TableName(("lakehouse", "public", "t0"))
    sql = pin_sources(tree, qualify, {t0: 7}, {t0: {"b": 42, "gone": None}}).sql("spark")
    assert "VERSION AS OF 42" in sql and "VERSION AS OF 'gone'" in sql and "'b'" not in sql


def test_a_semi_joined_tables_struct_field_is_read_as_a_field() -> None:
    """sqlglot reads ``l1.st.a`` as column ``a`` of a table ``st``; in a semi or anti
    join's ON (whose table is not selected) its qualification then fails."""
    tree = parse_query(
        "SELECT l0.k FROM t0 AS l0 LEFT ANTI JOIN t1 AS l1 ON l0.k = l1.k AND l1.st.a.x > 0 "
        "LEFT SEMI JOIN t1 AS l2 ON l2.st.a = l0.st.a"
    )
    semi_join_fields_as_dots(tree)
    fields = sorted(
        d.sql("spark") for d in tree.find_all(exp.Dot) if not isinstance(d.parent, exp.Dot)
    )
    assert fields == ["l1.st.a.x", "l2.st.a"]
    # the ON's other side: qualify tells it from a column as it is
    assert "l0.st.a" in [c.sql("spark") for c in tree.find_all(exp.Column)]


@pytest.mark.parametrize(
    ("sql", "columns", "said"),
    [
        ("SELECT id FROM t WHERE d > current_date", [], None),
        ("SELECT id, current_date() AS today FROM t", ["current_date"], None),
        ("SELECT t.current_date AS c FROM t WHERE d = curdate()", ["current_date"], None),
        ("SELECT id FROM t WHERE d > current_date", ["ID", "CURRENT_DATE"], "column's name"),
        ("SELECT current_date FROM (SELECT d AS current_date FROM t) AS x", [], "column's name"),
        ("SELECT `current_date` FROM t WHERE d < current_date", [], "column's name"),
        ("SELECT id, current_date FROM t", [], "name it"),
        ("SELECT x.* FROM (SELECT id, date_add(current_date(), 1) FROM t) AS x", [], "name it"),
        ("WITH c AS (SELECT current_date() FROM t) SELECT * FROM c", [], "name it"),
        ("SELECT id FROM t UNION ALL SELECT current_date() FROM t", [], "name it"),
        # a subquery read by value or position: its items' names are read by nothing
        # (seed 670716: a scalar subquery's MIN(coalesce(dd, current_date())))
        ("SELECT id FROM t WHERE d <> (SELECT MIN(coalesce(d, current_date())) FROM t)", [], None),
        ("SELECT id, (SELECT current_date() FROM u LIMIT 1) AS c FROM t", [], None),
        ("SELECT id FROM t WHERE d IN (SELECT date_sub(current_date(), 1) FROM u)", [], None),
        ("SELECT id FROM t WHERE EXISTS (SELECT current_date() FROM u WHERE u.d = t.d)", [], None),
        ("SELECT id FROM t WHERE d > ALL (SELECT current_date() FROM u)", [], None),
    ],
)
def test_current_date_is_read_as_the_day_only_where_it_cannot_mean_another_thing(
    sql: str, columns: list[str], said: str | None
) -> None:
    found = current_date_unclear(parse_query(sql), sql, columns)
    assert found is None if said is None else said in (found or "")


@pytest.mark.parametrize(
    ("sql", "columns", "found"),
    [
        ("SELECT id, current_user() AS u FROM t", [], ["CURRENT_USER()"]),
        ("SELECT id FROM t WHERE owner = user()", [], ["USER()"]),
        ("SELECT id FROM t WHERE owner = session_user", [], ["SESSION_USER()"]),
        ("SELECT id FROM t WHERE owner = user", [], ["USER()"]),
        ("SELECT current_database() AS db, id FROM t", [], ["CURRENT_DATABASE()"]),
        ("SELECT id FROM t WHERE s = current_schema()", [], ["CURRENT_SCHEMA()"]),
        ("SELECT id, current_catalog() AS c FROM t", [], ["CURRENT_CATALOG()"]),
        # a bare name where a column of that name is in scope is the column
        ("SELECT id, current_user FROM t", ["id", "CURRENT_USER"], []),
        ("SELECT id FROM t WHERE owner = user", ["owner", "user"], []),
        ("SELECT id FROM user JOIN user AS u ON u.id = user.id", [], []),
        ("SELECT u.current_user AS who FROM t AS u", [], []),
        ("SELECT current_user AS who FROM (SELECT id AS current_user FROM t) AS x", [], []),
        # ... but a call is the call
        ("SELECT id, current_user() AS u FROM t", ["current_user"], ["CURRENT_USER()"]),
        # fixed for every refresh: the zone is recorded at CREATE
        ("SELECT id, current_timezone() AS z FROM t", [], []),
    ],
)
def test_calls_reading_the_session_are_found(
    sql: str, columns: list[str], found: list[str]
) -> None:
    assert session_calls(parse_query(sql), sql, columns) == found
    assert reads_context(parse_query(sql), sql) or not found


@pytest.mark.parametrize(
    ("sql", "columns", "found"),
    [
        ("SELECT id, current_timestamp FROM t", [], ["CURRENT_TIMESTAMP()"]),
        ("SELECT id, current_timestamp FROM t", ["current_timestamp"], []),
        # a table's alias qualifying a column (current_timestamp.id) is a name
        ("SELECT current_timestamp.id FROM t current_timestamp", [], []),
        # a call is check_deterministic's
        ("SELECT id, current_timestamp() AS x FROM t", [], []),
    ],
)
def test_a_bare_current_timestamp_is_the_clock_only_where_it_names_nothing(
    sql: str, columns: list[str], found: list[str]
) -> None:
    assert clock_calls(sql, columns) == found


def test_a_bare_session_word_is_written_back_as_the_column_it_reads() -> None:
    """sqlglot writes ``current_user`` back as ``CURRENT_USER()``, which Spark reads as
    the session's user where the query read the column (a refresh computed 'root')."""
    sql = "SELECT current_user, COUNT(*) AS n FROM t GROUP BY current_user"
    assert parse_query(sql).sql("spark") == (
        "SELECT `current_user`, COUNT(*) AS n FROM t GROUP BY `current_user`"
    )
    called = "SELECT current_user() AS u, t.user FROM t"
    assert parse_query(called).sql("spark") == "SELECT CURRENT_USER() AS u, t.user FROM t"
    # ... and so is a table's alias qualifying a column, and current_timestamp
    aliased = "SELECT current_user.id, current_timestamp FROM t AS current_user"
    assert parse_query(aliased).sql("spark") == (
        "SELECT `current_user`.id, `current_timestamp` FROM t AS current_user"
    )
