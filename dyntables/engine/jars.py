"""Where the Iceberg runtime jar comes from.

The only registries reachable from our machines are package registries, so the jar
ships inside a Python wheel (snowpark-connect-deps-iceberg==1.0.2, Iceberg 1.10.2). A
user on a cluster brings their own with spark.jars / spark.jars.packages instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from dyntables.errors import ConfigError

ICEBERG_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"


def iceberg_runtime_jar() -> Path:
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the Iceberg runtime jar is missing: install 'snowpark-connect-deps-iceberg==1.0.2' "
            "(make setup does) or set spark.jars to your own iceberg-spark-runtime-3.5 jar"
        )
    for location in spec.submodule_search_locations:
        jar = Path(location) / "jars" / ICEBERG_JAR
        if jar.is_file():
            return jar
    raise ConfigError(
        f"{ICEBERG_JAR} not found inside snowpark-connect-deps-iceberg; reinstall version 1.0.2 exactly"
    )
