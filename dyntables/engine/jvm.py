"""Java classes by their full name, without py4j's name resolution.

``spark._jvm.org.apache.x.Y`` resolves one package level at a time, and each level is a
class lookup that fails after trying every import of PySpark's JVM view against every
jar on the driver's class path: 8-13 ms per name on this machine, and a refresh named a
class about ten times (each ``load_table``). A ``JavaClass`` built from the full name
asks the JVM nothing until a member is used.
"""

from __future__ import annotations

from typing import Any


def java_class(spark: Any, fqn: str) -> Any:
    """The Java class ``fqn`` (e.g. ``org.apache.hadoop.fs.Path``) of ``spark``'s JVM:
    call its static methods, or call it to construct an instance."""
    from py4j.java_gateway import JavaClass

    return JavaClass(fqn, spark.sparkContext._gateway._gateway_client)
