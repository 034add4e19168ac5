"""When a refresh refuses to write rows by position: the query's ``*`` expanded
otherwise than at CREATE."""

from __future__ import annotations

import pytest

from dyntables.catalog.definition import DynamicTableDef
from dyntables.errors import QueryColumnsChangedError
from dyntables.refresh.full import check_columns
from dyntables.sql.tokens import TableName


def _dt(query_columns: tuple[str, ...] = ()) -> DynamicTableDef:
    return DynamicTableDef(
        TableName(("lakehouse", "public", "dt")),
        "id",
        "SELECT * FROM t",
        (),
        query_columns=query_columns,
    )


def test_names_recorded_at_create_decide() -> None:
    dt = _dt(("a", "b"))
    check_columns(dt, ["A", "b"], ["x", "y"], dt.query_columns)  # listed names: by position
    check_columns(dt, ["a", "b"], ["b", "a"], dt.query_columns)  # listed as a permutation
    with pytest.raises(
        QueryColumnsChangedError,
        match=r"now returns the columns \(b, a\), at CREATE it returned \(a, b\)",
    ):
        check_columns(dt, ["b", "a"], ["x", "y"], dt.query_columns)
    with pytest.raises(QueryColumnsChangedError):
        check_columns(dt, ["a", "b", "c"], ["a", "b"], dt.query_columns)


def test_the_compilers_names_are_settled_by_sparks() -> None:
    """A compiler naming a column otherwise than at CREATE (a newer version, say) is not
    a changed ``*`` when Spark still resolves the CREATE's names."""
    dt = _dt(("-1_c", "k"))
    check_columns(dt, ["m1_c", "k"], ["-1_c", "k"], ("1_c", "k"), lambda: ["-1_c", "k"])
    with pytest.raises(
        QueryColumnsChangedError, match=r"\(k, -1_c\), at CREATE it returned \(-1_c, k\)"
    ):
        check_columns(dt, ["k", "1_c"], ["-1_c", "k"], ("1_c", "k"), lambda: ["k", "-1_c"])


def test_without_recorded_names_only_a_count_or_the_tables_own_names_moved_are_refused() -> None:
    dt = _dt()
    check_columns(dt, ["a", "b"], ["x", "y"])
    check_columns(dt, ["1_c", "k"], ["-1_c", "k"])
    with pytest.raises(QueryColumnsChangedError, match="the table has"):
        check_columns(dt, ["b", "a"], ["a", "b"])
    with pytest.raises(QueryColumnsChangedError):
        check_columns(dt, ["a"], ["a", "b"])
