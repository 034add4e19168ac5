"""Splitting a script into statements, the way Spark's own CLI users expect.

Semicolons inside string literals, quoted identifiers and comments do not split: the
split is done on sqlglot's tokens, not on characters.
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from dyntables.sql.tokens import tokenize


def split_statements(text: str) -> list[str]:
    """Return the non-empty statements of ``text``, without their trailing semicolons."""
    statements: list[str] = []
    start = None
    end = None
    for tok in tokenize(text):
        if tok.token_type == TokenType.SEMICOLON:
            if start is not None and end is not None:
                statements.append(text[start : end + 1])
            start = end = None
            continue
        if start is None:
            start = tok.start
        end = tok.end
    if start is not None and end is not None:
        statements.append(text[start : end + 1])
    return statements


def is_complete(text: str) -> bool:
    """True when ``text`` ends with a statement terminator (for the interactive shell)."""
    try:
        tokens = tokenize(text)
    except Exception:
        return False  # e.g. an unterminated string: keep reading lines
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON
