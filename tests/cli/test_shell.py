"""The shell fed from a pipe, and its statement reader on its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dyntables.cli.shell import StatementReader, is_exit_command
from tests.cli.fakes import BorrowedLakehouse, CliResult, FakeLakehouse

Cli = Callable[..., CliResult]


def test_piped_session_survives_an_error_and_stops_at_exit(
    cli: Cli, borrowed: BorrowedLakehouse, unique: Callable[[str], str]
) -> None:
    table = unique("cli_shell")
    script = f"""
CREATE TABLE {table} (id INT, name STRING);

INSERT INTO {table}
  VALUES (1, 'a;b'),   -- a ';' in a string and in a comment does not end it
         (2, NULL);
SELECT * FROM no_such_table_in_shell;
SELECT name, id
FROM {table}
ORDER BY id;
SELECT * FROM no_such_table_in_shell; SELECT 'same line' AS after_error;
exit
SELECT 'never runs' AS x;
"""
    result = cli("shell", stdin=script, factory=borrowed.factory)
    assert result.out == (
        "OK\n"
        "OK\n"
        "name | id\n"
        "-----+---\n"
        "a;b  |  1\n"
        "NULL |  2\n"
        "(2 rows)\n"
        "after_error\n"
        "-----------\n"
        "same line\n"
        "(1 row)\n"
    )
    errors = result.err.splitlines()
    assert len(errors) == 2
    assert all(line.startswith("error [TABLE_NOT_FOUND]: ") for line in errors)
    assert result.code == 1  # piped input with a failure: scripts can check the status
    assert borrowed.closed


def test_piped_session_without_errors_exits_0_and_runs_a_last_unterminated_statement(
    cli: Cli,
) -> None:
    fake = FakeLakehouse()
    result = cli("shell", stdin="CREATE TABLE t (a INT);\n\nDROP TABLE t", factory=fake.factory)
    assert (result.code, result.out, result.err) == (0, "OK\nOK\n", "")
    assert fake.statements == ["CREATE TABLE t (a INT)", "DROP TABLE t"]


def test_reader_joins_lines_until_a_real_semicolon() -> None:
    reader = StatementReader()
    assert reader.feed("") is None and not reader.pending
    assert reader.feed("SELECT 'x;'") is None
    assert reader.feed("  -- ; still going") is None
    assert reader.pending
    assert reader.feed("  , 2;") == "SELECT 'x;'\n  -- ; still going\n  , 2;"
    assert not reader.pending


def test_reader_flush_returns_the_rest_once() -> None:
    reader = StatementReader()
    reader.feed("SELECT 1")
    assert reader.flush() == "SELECT 1"
    assert reader.flush() is None


@pytest.mark.parametrize(
    ("line", "leaves"),
    [("exit", True), (" QUIT; ", True), ("\\q", True), ("exit_code", False), ("select 1;", False)],
)
def test_exit_commands(line: str, leaves: bool) -> None:
    assert is_exit_command(line) is leaves
