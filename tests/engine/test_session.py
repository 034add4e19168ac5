"""Start-up checks that must fail clearly *before* Spark starts, and the settings a
session gets."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dyntables.engine import java
from dyntables.engine.session import (
    EXCLUDED_OPTIMIZER_RULES,
    embedded_conf,
    exclude_optimizer_rules,
    prepare_warehouse,
)
from dyntables.errors import JavaNotFoundError, WarehouseError


def test_unwritable_warehouse_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        target = blocker / "warehouse"  # a folder under a regular file: unwritable even for root
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        target = locked / "warehouse"
    with pytest.raises(WarehouseError) as err:
        prepare_warehouse(target)
    assert str(target) in err.value.message and "--warehouse" in err.value.message
    assert not target.exists()


def test_warehouse_is_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert prepare_warehouse(target) == target.resolve()
    assert target.is_dir() and list(target.iterdir()) == []


def test_missing_java_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java.check_java.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    try:
        with pytest.raises(JavaNotFoundError) as err:
            java.check_java()
        assert "Java 17" in err.value.message and "apt-get install" in err.value.message
    finally:
        java.check_java.cache_clear()


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    fake.chmod(0o755)
    java.check_java.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    try:
        with pytest.raises(JavaNotFoundError, match="Java 11 found"):
            java.check_java()
    finally:
        java.check_java.cache_clear()


def test_embedded_defaults_are_lean_and_iceberg(tmp_path: Path) -> None:
    conf = embedded_conf(tmp_path, "lakehouse")
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.sql.catalog.lakehouse.type"] == "hadoop"
    assert conf["spark.sql.catalog.lakehouse.table-default.write.merge.mode"] == "copy-on-write"
    assert conf["spark.jars"].endswith("iceberg-spark-runtime-3.5_2.12-1.10.2.jar")


def test_the_rule_spark_fails_on_is_excluded_beside_the_users(lh) -> None:  # type: ignore[no-untyped-def]
    """A session given by a user keeps its own excluded rules and gains ours, once."""
    key = "spark.sql.optimizer.excludedRules"
    before = lh.spark.conf.get(key, "")
    try:
        lh.spark.conf.set(key, "org.example.Mine")
        exclude_optimizer_rules(lh.spark)
        exclude_optimizer_rules(lh.spark)
        assert lh.spark.conf.get(key).split(",") == ["org.example.Mine", *EXCLUDED_OPTIMIZER_RULES]
    finally:
        lh.spark.conf.set(key, before)
