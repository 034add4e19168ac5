"""Stand-ins for what the CLI talks to: the shared Lakehouse lent out, or no Spark at all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dyntables import Lakehouse
from dyntables.cli.config import Settings


@dataclass
class CliResult:
    code: int
    out: str
    err: str


class BorrowedLakehouse:
    """The session-scoped Lakehouse as the CLI sees it: close() is recorded, not done."""

    def __init__(self, lakehouse: Lakehouse) -> None:
        self._lakehouse = lakehouse
        self.closed = False
        self.settings: Settings | None = None

    def factory(self, settings: Settings) -> BorrowedLakehouse:
        self.settings = settings
        return self

    def sql(self, text: str) -> Any:
        return self._lakehouse.sql(text)

    def close(self) -> None:
        self.closed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lakehouse, name)


class FakeFrame:
    """Just what the CLI reads from a DataFrame: columns, limit(), collect()."""

    def __init__(self, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
        self.columns = list(columns)
        self._rows = list(rows)

    def limit(self, n: int) -> FakeFrame:
        return FakeFrame(self.columns, self._rows[:n])

    def collect(self) -> list[tuple[Any, ...]]:
        return list(self._rows)


class FakeLakehouse:
    """No Spark: every statement is recorded and answers with ``frame``."""

    def __init__(self, frame: FakeFrame | None = None) -> None:
        self.frame = frame or FakeFrame([], [])
        self.statements: list[str] = []
        self.closed = False
        self.settings: Settings | None = None

    def factory(self, settings: Settings) -> FakeLakehouse:
        self.settings = settings
        return self

    def sql(self, text: str) -> FakeFrame:
        self.statements.append(text)
        return self.frame

    def close(self) -> None:
        self.closed = True
