"""dyntables.toml discovery and precedence: pure, tmp folders, no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyntables.cli.config import (
    find_config_file,
    load_config_file,
    parse_conf_pairs,
    resolve_settings,
)
from dyntables.errors import ConfigError

TOML = """\
[dyntables]
warehouse = "data/wh"
catalog = "cat_from_toml"
namespace = "sales"

[spark]
"spark.master" = "spark://host:7077"
"spark.sql.shuffle.partitions" = 8
"spark.sql.adaptive.enabled" = false
spark.driver.memory = "4g"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root holding dyntables.toml, with a nested working folder."""
    (tmp_path / "dyntables.toml").write_text(TOML)
    (tmp_path / "src" / "jobs").mkdir(parents=True)
    return tmp_path


def test_found_by_walking_up_from_a_sub_folder(project: Path) -> None:
    assert find_config_file(project / "src" / "jobs") == (project / "dyntables.toml").resolve()


def test_nearest_file_wins(project: Path) -> None:
    (project / "src" / "dyntables.toml").write_text("[dyntables]\n")
    assert (
        find_config_file(project / "src" / "jobs") == (project / "src" / "dyntables.toml").resolve()
    )


def test_no_file_means_defaults(tmp_path: Path) -> None:
    assert find_config_file(tmp_path) is None
    settings = resolve_settings(cwd=tmp_path, environ={})
    assert settings.warehouse == tmp_path / "warehouse"
    assert settings.catalog is None
    assert settings.namespace == "public"
    assert settings.spark_conf == {}
    assert settings.config_file is None


def test_file_values_and_relative_warehouse(project: Path) -> None:
    settings = resolve_settings(cwd=project / "src" / "jobs", environ={})
    # Relative to the toml's folder, not to where the command runs.
    assert settings.warehouse.resolve() == (project / "data" / "wh").resolve()
    assert settings.catalog == "cat_from_toml"
    assert settings.namespace == "sales"
    assert settings.spark_conf == {
        "spark.master": "spark://host:7077",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.memory": "4g",
    }


def test_warehouse_precedence_flag_env_file_default(project: Path, tmp_path: Path) -> None:
    cwd = project / "src"
    env = {"DYNTABLES_WAREHOUSE": "/from/env"}
    assert resolve_settings(cwd=cwd, environ=env, warehouse="flag_wh").warehouse == cwd / "flag_wh"
    assert resolve_settings(cwd=cwd, environ=env).warehouse == Path("/from/env")
    assert resolve_settings(cwd=cwd, environ={"DYNTABLES_WAREHOUSE": ""}).warehouse == (
        project / "data" / "wh"
    )
    (project / "dyntables.toml").write_text("[spark]\n")
    assert resolve_settings(cwd=cwd, environ={}).warehouse == cwd / "warehouse"


def test_conf_flags_override_the_file(project: Path) -> None:
    settings = resolve_settings(
        cwd=project,
        environ={},
        conf=["spark.master=local[2]", "spark.extra=a=b"],
        catalog="cat_from_flag",
    )
    assert settings.spark_conf["spark.master"] == "local[2]"
    assert settings.spark_conf["spark.extra"] == "a=b"
    assert settings.spark_conf["spark.driver.memory"] == "4g"
    assert settings.catalog == "cat_from_flag"


def test_conf_without_equals_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_conf_pairs(["spark.master"])
    assert info.value.code == "CONFIG_INVALID"
    assert "key=value" in info.value.one_line()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[dyntables\nwarehouse = 1", "not valid TOML"),
        ("[dyntables]\nwarehous = 'x'", "unknown key(s) warehous"),
        ("[dyntables]\nwarehouse = 3", "must be a non-empty string"),
        ("dyntables = 1", "[dyntables] must be a table"),
        ("[spark]\n'spark.jars' = ['a', 'b']", "must be a string, number or boolean"),
    ],
)
def test_bad_files_are_one_line_config_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "dyntables.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    line = info.value.one_line()
    assert line.startswith("error [CONFIG_INVALID]: ")
    assert fragment in line
    assert "\n" not in line
