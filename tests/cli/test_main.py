"""``dyntables`` commands in-process: exit codes, output and the one-line error contract."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from dyntables import __version__
from dyntables.cli.config import Settings
from tests.cli.fakes import BorrowedLakehouse, CliResult, FakeFrame, FakeLakehouse

Cli = Callable[..., CliResult]


def assert_one_error_line(result: CliResult, code: str) -> str:
    assert result.code == 1
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"error [{code}]: ")
    return lines[0]


# -- with Spark (the shared session) ---------------------------------------------------------


def test_sql_script_creates_inserts_and_prints_the_last_result(
    cli: Cli, borrowed: BorrowedLakehouse, unique: Callable[[str], str]
) -> None:
    table = unique("cli_orders")
    script = f"""
        CREATE TABLE {table} (id INT, name STRING, amount DECIMAL(10, 2));
        INSERT INTO {table} VALUES (1, 'alice', 10.5), (2, 'bob', NULL), (3, 'carol', 7.25);
        SELECT * FROM {table} ORDER BY id
    """
    result = cli("sql", "-e", script, factory=borrowed.factory)
    assert result.err == ""
    assert result.code == 0
    assert result.out == (
        "id | name  | amount\n"
        "---+-------+-------\n"
        " 1 | alice |  10.50\n"
        " 2 | bob   |   NULL\n"
        " 3 | carol |   7.25\n"
        "(3 rows)\n"
    )
    assert borrowed.closed


def test_sql_file_with_comments_and_semicolons_in_strings(
    cli: Cli, borrowed: BorrowedLakehouse, tmp_path: Path
) -> None:
    script = tmp_path / "query.sql"
    script.write_text("-- first; not a statement\nSELECT 'a;b' AS s,\n       2 AS n;\n")
    result = cli("sql", "-f", str(script), factory=borrowed.factory)
    assert (result.code, result.err) == (0, "")
    assert result.out == "s   | n\n----+--\na;b | 2\n(1 row)\n"


def test_ddl_prints_ok(cli: Cli, borrowed: BorrowedLakehouse, unique: Callable[[str], str]) -> None:
    result = cli("sql", "-e", f"CREATE TABLE {unique('cli_ddl')} (a INT)", factory=borrowed.factory)
    assert (result.code, result.out, result.err) == (0, "OK\n", "")


def test_syntax_error_is_one_line(cli: Cli, borrowed: BorrowedLakehouse) -> None:
    result = cli("sql", "-e", "SELEC 1", factory=borrowed.factory)
    line = assert_one_error_line(result, "SQL_SYNTAX")
    assert "SELEC" in line
    assert borrowed.closed


def test_unknown_table_is_one_line(cli: Cli, borrowed: BorrowedLakehouse) -> None:
    result = cli("sql", "-e", "SELECT * FROM no_such_table_for_cli", factory=borrowed.factory)
    line = assert_one_error_line(result, "TABLE_NOT_FOUND")
    assert "no_such_table_for_cli" in line


def test_failure_while_fetching_rows_is_a_coded_error(
    cli: Cli, borrowed: BorrowedLakehouse
) -> None:
    """A SELECT is lazy: it fails in collect(), after the facade has returned."""
    result = cli("sql", "-e", "SELECT raise_error('boom') AS x", factory=borrowed.factory)
    assert_one_error_line(result, "SQL_EXECUTION")


def test_max_rows_truncates_and_says_so(cli: Cli, borrowed: BorrowedLakehouse) -> None:
    result = cli(
        "--max-rows",
        "2",
        "sql",
        "-e",
        "SELECT id FROM range(5) ORDER BY id",
        factory=borrowed.factory,
    )
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[:4] == ["id", "--", " 0", " 1"]
    assert "truncated to the first 2 rows" in lines[4]
    assert len(lines) == 5


@pytest.mark.parametrize("after_command", [False, True])
def test_wide_prints_long_values_whole(
    cli: Cli, borrowed: BorrowedLakehouse, after_command: bool
) -> None:
    query = ["sql", "-e", "SELECT repeat('x', 100) AS s"]
    cut = cli(*query, factory=borrowed.factory).out.splitlines()
    assert cut[2].endswith("…") and "--wide" in cut[3]
    argv = [*query, "--wide"] if after_command else ["--wide", *query]
    whole = cli(*argv, factory=borrowed.factory).out.splitlines()
    assert whole[2:] == ["x" * 100, "(1 row)"]


def test_debug_adds_the_traceback_before_the_line(cli: Cli, borrowed: BorrowedLakehouse) -> None:
    result = cli("--debug", "sql", "-e", "SELEC 1", factory=borrowed.factory)
    assert result.code == 1
    assert result.err.startswith("Traceback")
    assert result.err.splitlines()[-1].startswith("error [SQL_SYNTAX]: ")


# -- without Spark -----------------------------------------------------------------------------


def test_version_needs_no_spark(cli: Cli) -> None:
    result = cli("version")
    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines() == [
        f"dyntables {__version__}",
        f"pyspark {metadata.version('pyspark')}",
        "iceberg 1.10.2 (iceberg-spark-runtime-3.5_2.12-1.10.2.jar)",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["sql"],
        ["sql", "-e", "SELECT 1", "-f", "x.sql"],
        ["--max-rows", "-1", "sql", "-e", "SELECT 1"],
        ["sql", "-f", "missing.sql"],
        ["demo", "--interval", "0"],
    ],
)
def test_usage_errors_exit_2_before_spark(cli: Cli, argv: list[str]) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert "usage: dyntables" in result.err


def test_help_exits_0(cli: Cli) -> None:
    result = cli("--help")
    assert result.code == 0
    assert "shell" in result.out and "--warehouse" in result.out


def test_bad_conf_is_a_config_error_before_spark(cli: Cli) -> None:
    result = cli("--conf", "spark.master", "sql", "-e", "SELECT 1")
    assert "--conf 'spark.master' is not key=value" in assert_one_error_line(
        result, "CONFIG_INVALID"
    )


def test_bad_toml_is_a_config_error(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "dyntables.toml").write_text("[dyntables\n")
    result = cli("sql", "-e", "SELECT 1")
    assert "dyntables.toml is not valid TOML" in assert_one_error_line(result, "CONFIG_INVALID")


def test_empty_sql_fails_before_spark(cli: Cli) -> None:
    assert_one_error_line(cli("sql", "-e", " ; -- nothing"), "DT_ERROR")


def test_options_before_and_after_the_command_reach_the_settings(cli: Cli, tmp_path: Path) -> None:
    fake = FakeLakehouse()
    result = cli(
        "--warehouse", "wh", "--conf", "spark.a=1", "--max-rows", "5",
        "sql", "--conf", "spark.b=2", "--catalog", "cat", "-e", "CREATE TABLE t (a INT)",
        factory=fake.factory,
    )  # fmt: skip
    assert (result.code, result.out, result.err) == (0, "OK\n", "")
    assert fake.settings == Settings(
        warehouse=tmp_path / "wh",
        catalog="cat",
        spark_conf={"spark.a": "1", "spark.b": "2"},
    )
    assert fake.statements == ["CREATE TABLE t (a INT)"]
    assert fake.closed


def test_env_warehouse_is_used_without_the_flag(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYNTABLES_WAREHOUSE", str(tmp_path / "envwh"))
    fake = FakeLakehouse()
    assert cli("sql", "-e", "SELECT 1", factory=fake.factory).code == 0
    assert fake.settings is not None and fake.settings.warehouse == tmp_path / "envwh"


def test_sql_file_from_stdin(cli: Cli) -> None:
    fake = FakeLakehouse(FakeFrame(["x"], [(1,)]))
    result = cli("sql", "-f", "-", stdin="SELECT 1 AS x;\n", factory=fake.factory)
    assert (result.code, result.out) == (0, "x\n-\n1\n(1 row)\n")
    assert fake.statements == ["SELECT 1 AS x;\n"]


def test_unexpected_exception_is_one_internal_line(cli: Cli) -> None:
    def broken(settings: Settings) -> Any:
        raise RuntimeError("boom\nsecond line")

    line = assert_one_error_line(cli("sql", "-e", "SELECT 1", factory=broken), "INTERNAL")
    assert line == "error [INTERNAL]: RuntimeError: boom"


def test_lakehouse_is_closed_when_the_statement_fails(cli: Cli) -> None:
    class Failing(FakeLakehouse):
        def sql(self, text: str) -> FakeFrame:
            raise ValueError("bad")

    fake = Failing()
    assert_one_error_line(cli("sql", "-e", "SELECT 1", factory=fake.factory), "INTERNAL")
    assert fake.closed


def test_keyboard_interrupt_exits_130_quietly(cli: Cli) -> None:
    def interrupted(settings: Settings) -> Any:
        raise KeyboardInterrupt

    result = cli("sql", "-e", "SELECT 1", factory=interrupted)
    assert (result.code, result.out, result.err) == (130, "", "")


def test_demo_calls_run_demo_with_the_options(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []
    fake_module = types.ModuleType("dyntables.demo")
    fake_module.run_demo = lambda lh, **kwargs: calls.append((lh, kwargs))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dyntables.demo", fake_module)
    fake = FakeLakehouse()
    result = cli("demo", "--duration", "3", "--no-live", "--interval", "0.5", factory=fake.factory)
    assert result.code == 0
    assert calls == [(fake, {"duration": 3.0, "live": False, "interval": 0.5})]
    assert fake.closed
    cli("demo", factory=fake.factory)
    assert calls[-1][1] == {"duration": None, "live": True, "interval": 1.0}
