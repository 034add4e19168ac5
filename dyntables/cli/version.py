"""``dyntables version``: what is installed, read from metadata so Spark never starts."""

from __future__ import annotations

import re
from importlib import metadata

from dyntables import __version__
from dyntables.engine.jars import ICEBERG_JAR


def version_lines() -> list[str]:
    return [
        f"dyntables {__version__}",
        f"pyspark {_distribution_version('pyspark')}",
        f"iceberg {iceberg_version(ICEBERG_JAR)} ({ICEBERG_JAR})",
    ]


def iceberg_version(jar_name: str) -> str:
    """``iceberg-spark-runtime-3.5_2.12-1.10.2.jar`` -> ``1.10.2`` (the last version in the name)."""
    match = re.search(r"-(\d+(?:\.\d+)+)\.jar$", jar_name)
    return match.group(1) if match else "unknown"


def _distribution_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"
