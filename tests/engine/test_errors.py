"""A Java exception reached through Py4J, summarized for a one-line message."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

from dyntables import Lakehouse
from dyntables.engine.errors import summary
from dyntables.errors import TableNotFoundError


def test_a_java_exception_is_named_by_its_innermost_cause(lh: Lakehouse) -> None:
    with pytest.raises(Py4JJavaError) as raised:
        lh.spark._jvm.java.util.ArrayList().get(5)
    assert "\tat " in str(raised.value) or " at java." in str(raised.value)  # Py4J's own text
    assert summary(raised.value) == "IndexOutOfBoundsException: Index 5 out of bounds for length 0"


def test_a_python_exception_keeps_its_text() -> None:
    assert summary(ValueError("bad\nvalue")) == "ValueError: bad\nvalue"


def test_a_metadata_table_named_from_the_current_schema_gets_its_full_name(
    lh: Lakehouse,
) -> None:
    lh.sql("CREATE TABLE hinted (id INT) USING iceberg")
    lh.sql("INSERT INTO hinted VALUES (1)")
    with pytest.raises(TableNotFoundError) as raised:
        lh.sql("SELECT * FROM hinted.snapshots")
    assert "as in public.hinted.snapshots" in str(raised.value)
    assert lh.sql("SELECT COUNT(*) FROM public.hinted.snapshots").collect()[0][0] == 1
    with pytest.raises(TableNotFoundError) as raised:
        lh.sql("INSERT INTO hinted.branch_dev VALUES (2)")
    assert "as in public.hinted.branch_dev" in str(raised.value)
    with pytest.raises(TableNotFoundError) as raised:
        lh.sql("SELECT * FROM nowhere")
    assert "metadata tables" not in str(raised.value)
