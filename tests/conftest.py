"""One Spark session per test run: a session-scoped Lakehouse on a temporary warehouse."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from dyntables import Lakehouse

_counter = itertools.count()


@pytest.fixture(scope="session")
def lh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lakehouse]:
    warehouse = tmp_path_factory.mktemp("warehouse")
    with Lakehouse(
        warehouse=warehouse,
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    ) as lakehouse:
        yield lakehouse


@pytest.fixture
def unique() -> Callable[[str], str]:
    """unique("orders") -> "orders_17": table names that never collide between tests."""

    def make(prefix: str) -> str:
        return f"{prefix}_{next(_counter)}"

    return make


def rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    """Sorted plain tuples of a small result, for comparisons in tests."""
    return sorted((tuple(r) for r in df.collect()), key=repr)
