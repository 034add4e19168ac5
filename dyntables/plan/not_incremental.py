"""The signal that a query, or part of it, has no delta rule."""

from __future__ import annotations


class NotIncremental(Exception):
    """The query (or part of it) has no delta rule; the DT refreshes FULL."""

    def __init__(self, code: str, operator: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.operator = operator
        self.detail = detail
