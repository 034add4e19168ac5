"""A Java exception reached through Py4J, summarized for a one-line message."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

from dyntables import Lakehouse
from dyntables.engine.errors import summary


def test_a_java_exception_is_named_by_its_innermost_cause(lh: Lakehouse) -> None:
    with pytest.raises(Py4JJavaError) as raised:
        lh.spark._jvm.java.util.ArrayList().get(5)
    assert "\tat " in str(raised.value) or " at java." in str(raised.value)  # Py4J's own text
    assert summary(raised.value) == "IndexOutOfBoundsException: Index 5 out of bounds for length 0"


def test_a_python_exception_keeps_its_text() -> None:
    assert summary(ValueError("bad\nvalue")) == "ValueError: bad\nvalue"
