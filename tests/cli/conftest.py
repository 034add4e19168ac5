"""Running the CLI in-process: the shared Spark session is lent, never stopped.

``cli(...)`` calls ``main`` with captured output. Its default factory fails the test if a
Lakehouse is requested, so tests that must not start Spark prove that they do not.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dyntables import Lakehouse
from dyntables.cli.config import Settings
from dyntables.cli.main import main
from tests.cli.fakes import BorrowedLakehouse, CliResult


def _no_spark(settings: Settings) -> Lakehouse:
    pytest.fail("this command must not start Spark")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No dyntables.toml or DYNTABLES_* variable of the developer's leaks into a test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DYNTABLES_WAREHOUSE", raising=False)


@pytest.fixture
def borrowed(lh: Lakehouse) -> BorrowedLakehouse:
    return BorrowedLakehouse(lh)


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., CliResult]]:
    def run(
        *argv: str,
        factory: Callable[[Settings], Any] = _no_spark,
        stdin: str | None = None,
    ) -> CliResult:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()  # drop anything printed before the command
        code = main(list(argv), lakehouse_factory=factory)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    yield run
