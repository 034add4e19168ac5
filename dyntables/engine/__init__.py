"""Spark session + Iceberg catalog; the only place that builds sessions."""

from dyntables.engine.session import DEFAULT_CATALOG, DEFAULT_NAMESPACE, build_session

__all__ = ["DEFAULT_CATALOG", "DEFAULT_NAMESPACE", "build_session"]
