"""The statement tokenizer used from several threads at once (the scheduler refreshes
in threads; users share a Lakehouse between threads): each call reads its own text."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from dyntables.errors import SqlSyntaxError
from dyntables.sql.tokens import TableName, namespace_shown, needs_quotes, parse_name, tokenize


def _statement(i: int) -> str:
    cols = ", ".join(f"t{i}.c{j} AS a{i}_{j}" for j in range(300))
    return f"SELECT {cols} FROM t{i} WHERE t{i}.s LIKE 'x{i}%'"


def test_threads_tokenizing_at_once_each_read_their_own_text() -> None:
    texts = [_statement(i) for i in range(4)]
    expected = [[t.text for t in tokenize(text)] for text in texts]

    def read(i: int) -> bool:
        return all([t.text for t in tokenize(texts[i])] == expected[i] for _ in range(15))

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(read, [0, 1, 2, 3] * 2))


def test_names_are_written_back_quoted_where_spark_needs_it() -> None:
    name = TableName(("lakehouse", "my-ns", "2024", "a`b", "plain_1", "é"))
    assert name.sql() == "lakehouse.`my-ns`.`2024`.`a``b`.plain_1.`é`"
    # a keyword: ANSI's reserved words (order) and the literals (true) are no names bare
    assert TableName(("lakehouse", "public", "order", "true")).sql() == (
        "lakehouse.public.`order`.`true`"
    )


def test_a_name_as_written_is_split_at_its_dots_only_outside_quotes() -> None:
    assert parse_name("`my-ns`.`a.b`").parts == ("my-ns", "a.b")
    assert parse_name("c.ns.t").parts == ("c", "ns", "t")
    assert parse_name(TableName(("x`y", "2024")).sql()).parts == ("x`y", "2024")
    with pytest.raises(SqlSyntaxError):
        parse_name("ns.t extra")


def test_a_namespace_spark_shows_back_quoted_is_read_as_its_name() -> None:
    assert namespace_shown("`my-ns`") == "my-ns"
    assert namespace_shown("`a``b`") == "a`b"
    assert namespace_shown("public") == "public"
    assert namespace_shown("a.b") == "a.b"  # nested: as given


def test_every_word_spark_reserves_under_ansi_is_back_quoted(lh) -> None:  # noqa: ANN001
    """A column named ``user`` made the compiler's SQL a syntax error in a session with
    spark.sql.ansi.enforceReservedKeywords (helper-21): sqlglot's keywords lack it."""
    spark = lh.spark
    keys = ("spark.sql.ansi.enabled", "spark.sql.ansi.enforceReservedKeywords")
    before = {k: spark.conf.get(k) for k in keys}
    try:
        for k in keys:
            spark.conf.set(k, "true")
        reserved = [r[0] for r in spark.sql("SELECT * FROM sql_keywords()").collect() if r[1]]
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
    assert len(reserved) > 50
    assert [w for w in reserved if not needs_quotes(w) or not needs_quotes(w.lower())] == []
