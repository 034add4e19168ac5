"""One Spark session per test run: a session-scoped Lakehouse on a temporary warehouse."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest

from dyntables import Lakehouse
from dyntables.engine.session import JAVA_OPTIONS

_counter = itertools.count()

# Small data: few partitions. A throughput collector: the suite is thousands of short
# jobs on two cores, where G1's concurrent threads cost ~8% of the run (A/B on
# tests/refresh/test_incremental.py + tests/scenarios: 165-178 s against 179-193 s).
TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.extraJavaOptions": f"{JAVA_OPTIONS} -XX:+UseParallelGC",
}


@pytest.fixture(scope="session")
def lh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lakehouse]:
    warehouse = tmp_path_factory.mktemp("warehouse")
    conf = dict(TEST_CONF)
    # Iceberg's JDBC catalog over an embedded H2 database instead of the Hadoop catalog
    # (a catalog that renames tables, as REST, Hive and Glue do): the H2 jar's path
    if os.environ.get("DYNTABLES_TEST_JDBC"):
        from dyntables.engine.jars import iceberg_runtime_jar

        conf["spark.jars"] = f"{iceberg_runtime_jar()},{os.environ['DYNTABLES_TEST_JDBC']}"
        conf["spark.sql.catalog.lakehouse.type"] = "jdbc"
        conf["spark.sql.catalog.lakehouse.uri"] = (
            f"jdbc:h2:file:{warehouse}/_meta;DATABASE_TO_LOWER=TRUE"
        )
        conf["spark.sql.catalog.lakehouse.jdbc.schema-version"] = "V1"
    with Lakehouse(warehouse=warehouse, conf=conf) as lakehouse:
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
