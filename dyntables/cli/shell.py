"""The interactive shell: multi-line statements ended by ``;``, one result per statement.

On a terminal it uses prompt_toolkit (line editing, history in ``~/.dyntables_history``);
otherwise it reads stdin line by line with the same ``;`` rule, so
``dyntables shell < script.sql`` behaves like typing the script and is testable by piping.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from dyntables import __version__
from dyntables.cli.report import report_error
from dyntables.cli.run import SqlRunner, run_sql
from dyntables.sql import is_complete, split_statements

if TYPE_CHECKING:
    from prompt_toolkit.history import History

HISTORY_FILE = "~/.dyntables_history"
PROMPT = "dyntables> "
CONTINUATION = "        -> "
EXIT_COMMANDS = frozenset({"exit", "quit", "\\q"})


class LineSource(Protocol):
    def read(self, continuation: bool) -> str | None:
        """The next line without its newline, or None at end of input."""


class StatementReader:
    """Collects lines until the text ends with a ``;`` that is not in a string or comment."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    @property
    def pending(self) -> bool:
        return bool(self._lines)

    def clear(self) -> None:
        self._lines = []

    def feed(self, line: str) -> str | None:
        """The complete chunk once ``line`` terminates it, else None (keep reading)."""
        if not self._lines and not line.strip():
            return None  # blank lines between statements do not open a continuation
        self._lines.append(line)
        text = "\n".join(self._lines)
        if is_complete(text):
            self.clear()
            return text
        return None

    def flush(self) -> str | None:
        """What is left at end of input: run it, as ``sql -e`` would run it without ``;``."""
        text = "\n".join(self._lines)
        self.clear()
        return text if text.strip() else None


def is_exit_command(line: str) -> bool:
    return line.strip().rstrip(";").strip().lower() in EXIT_COMMANDS


class StreamLines:
    """Lines from a pipe or file: no prompts, nothing echoed."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def read(self, continuation: bool) -> str | None:
        line = self._stream.readline()
        return line.rstrip("\r\n") if line else None


class PromptLines:
    """Lines typed at a terminal, with editing and persistent history."""

    def __init__(self) -> None:
        from prompt_toolkit import PromptSession

        self._session: Any = PromptSession(history=_history())

    def read(self, continuation: bool) -> str | None:
        try:
            return str(self._session.prompt(CONTINUATION if continuation else PROMPT))
        except EOFError:  # Ctrl-D
            return None


def run_shell(
    lh: SqlRunner,
    *,
    max_rows: int,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    debug: bool = False,
    source: LineSource | None = None,
    wide: bool = False,
) -> int:
    """Run statements until exit/quit/end of input.

    Returns 0, or 1 when reading from a pipe and any statement failed, so a piped script
    can be checked by its exit status (an interactive session always ends with 0).
    """
    interactive = source is None and stdin.isatty()
    if source is None:
        source = PromptLines() if interactive else StreamLines(stdin)
    if interactive:
        print(
            f"dyntables {__version__}: end statements with ';', leave with exit or Ctrl-D",
            file=stdout,
        )
    reader = StatementReader()
    failures = 0
    while True:
        try:
            line = source.read(continuation=reader.pending)
        except KeyboardInterrupt:
            if not interactive:
                raise
            reader.clear()  # Ctrl-C at the prompt drops the statement being typed
            continue
        if line is None:
            chunk = reader.flush()
        elif not reader.pending and is_exit_command(line):
            break
        else:
            chunk = reader.feed(line)
        if chunk is not None:
            failures += _run_chunk(lh, chunk, max_rows, wide, stdout, stderr, debug, interactive)
        if line is None:
            break
    return 1 if failures and not interactive else 0


def _run_chunk(
    lh: SqlRunner,
    chunk: str,
    max_rows: int,
    wide: bool,
    stdout: TextIO,
    stderr: TextIO,
    debug: bool,
    interactive: bool,
) -> int:
    """Run each statement of one chunk on its own; returns the failure count.

    A failure does not skip the statements after it on the same line: where one line
    ends is arbitrary in a piped script, so it must not change what runs.
    """
    try:
        statements = split_statements(chunk)
    except Exception as exc:  # e.g. an unterminated string at end of input
        report_error(exc, stderr, debug=debug)
        return 1
    failures = 0
    for statement in statements:
        try:
            output = run_sql(lh, statement, max_rows, wide=wide)
        except KeyboardInterrupt:
            if not interactive:
                raise
            # pyspark's SIGINT handler has already cancelled the running jobs.
            print("cancelled", file=stderr, flush=True)
            return failures + 1
        except Exception as exc:
            stdout.flush()  # keep results and errors in order when both go to one terminal
            report_error(exc, stderr, debug=debug)
            failures += 1
            continue
        print(output, file=stdout, flush=True)
        if interactive:
            print(file=stdout)
    return failures


def _history() -> History:
    """File history when the home folder is writable; else history just for this session."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = Path(os.path.expanduser(HISTORY_FILE))
    target = path if path.exists() else path.parent
    if path.parent.is_dir() and os.access(target, os.W_OK):
        return FileHistory(str(path))
    return InMemoryHistory()
