"""A cursor over sqlglot's Spark tokens, for the small grammar of our own statements.

Using sqlglot's tokenizer means string literals, quoted identifiers and comments are
handled exactly as Spark SQL would see them, and every token keeps its offsets so the
raw text of a sub-clause (the AS <select>, a WHERE condition) can be sliced out.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from dyntables.errors import SqlSyntaxError


class _Tokenizer(Spark.Tokenizer):
    # sqlglot swallows everything after SHOW / EXPLAIN into one string token; our
    # statements (SHOW DYNAMIC TABLES, EXPLAIN DYNAMIC TABLE) need real tokens.
    COMMANDS: set[TokenType] = set()  # type: ignore[misc]


# A tokenizer keeps the text it is reading in its own fields: one per thread, or two
# statements read at once (the scheduler's refresh threads, a user's threads sharing a
# Lakehouse) read each other's text.
_TOKENIZERS = threading.local()


def tokenize(text: str) -> list[Token]:
    tokenizer = getattr(_TOKENIZERS, "tokenizer", None)
    if tokenizer is None:
        tokenizer = _TOKENIZERS.tokenizer = _Tokenizer(dialect=Spark())
    try:
        return list(tokenizer.tokenize(text))
    except TokenError as exc:
        raise SqlSyntaxError(f"cannot read SQL: {str(exc).splitlines()[0]}") from exc


@dataclass(frozen=True)
class TableName:
    """A possibly qualified table name, as written (catalog.schema.table)."""

    parts: tuple[str, ...]

    @property
    def table(self) -> str:
        return self.parts[-1]

    def sql(self) -> str:
        return ".".join(quote_part(p) for p in self.parts)

    def __str__(self) -> str:
        return ".".join(self.parts)


# words Spark's lexer reads as something other than a name when bare (``true`` is a
# literal, ``not`` an operator; reserved words under ANSI): a superset, as quoting a
# name never changes it
_WORDS = frozenset(
    word.lower()
    for keyword in Spark.Tokenizer.KEYWORDS  # "ORDER BY" is one of sqlglot's
    for word in keyword.split()
    if word.replace("_", "").isalpha()
) | {
    # Spark 3.5's words reserved under spark.sql.ansi.enforceReservedKeywords that
    # sqlglot does not list (``SELECT keyword FROM sql_keywords() WHERE reserved`` in
    # such a session, less the words above)
    "authorization",
    "both",
    "cast",
    "check",
    "leading",
    "only",
    "percentile_cont",
    "percentile_disc",
    "trailing",
    "user",
    "within",
}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def needs_quotes(name: str) -> bool:
    """Whether Spark reads ``name`` as that name only back-quoted: not a plain ASCII
    word (``my-ns``, ``größe``, ``2024``: ``ns.2024`` lexes as ``ns`` and a number), or
    a keyword (``true``)."""
    return not _PLAIN.fullmatch(name) or name.lower() in _WORDS


def quote_part(part: str) -> str:
    """One name part as Spark reads it: back-quoted where it needs it."""
    return back_quoted(part) if needs_quotes(part) else part


def back_quoted(name: str) -> str:
    """``name`` as one Spark identifier, whatever it holds (a back-quote is doubled)."""
    return "`" + name.replace("`", "``") + "`"


_WORDLIKE = {TokenType.VAR, TokenType.IDENTIFIER}


class TokenStream:
    def __init__(self, text: str, tokens: list[Token] | None = None) -> None:
        self.text = text
        self.tokens = tokens if tokens is not None else tokenize(text)
        self.pos = 0

    # -- looking -----------------------------------------------------------------
    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def peek(self, offset: int = 0) -> Token | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def peek_word(self, offset: int = 0) -> str:
        """Upper-cased text of a token that is not a quoted identifier or string."""
        tok = self.peek(offset)
        if tok is None or tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
            return ""
        return tok.text.upper()

    def at(self, *words: str) -> bool:
        return self._match(words) is not None

    def _match(self, words: tuple[str, ...]) -> int | None:
        """Tokens needed to cover ``words``; sqlglot fuses some pairs ("PARTITIONED BY")."""
        want = list(words)
        used = 0
        while want:
            text = self.peek_word(used)
            if not text:
                return None
            parts = text.split()
            if want[: len(parts)] != parts:
                return None
            del want[: len(parts)]
            used += 1
        return used

    # -- consuming ---------------------------------------------------------------
    def accept(self, *words: str) -> bool:
        used = self._match(words)
        if used is None:
            return False
        self.pos += used
        return True

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of statement")
        self.pos += 1
        return tok

    def name(self) -> TableName:
        parts = [self._identifier()]
        while self.peek() is not None and self.peek().token_type == TokenType.DOT:  # type: ignore[union-attr]
            self.pos += 1
            parts.append(self._identifier())
        return TableName(tuple(parts))

    def _identifier(self) -> str:
        tok = self.peek()
        if tok is None:
            raise self.error("expected a name")
        if tok.token_type in (TokenType.STRING, TokenType.NUMBER) or tok.token_type in _PUNCTUATION:
            raise self.error("expected a name")
        self.pos += 1
        return tok.text

    def word(self) -> str:
        return self._identifier()

    def string(self) -> str:
        tok = self.next()
        if tok.token_type != TokenType.STRING:
            raise self.error("expected a quoted string", tok)
        return tok.text

    def integer(self) -> int:
        tok = self.next()
        if tok.token_type != TokenType.NUMBER or not tok.text.isdigit():
            raise self.error("expected a whole number", tok)
        return int(tok.text)

    def literal(self) -> str:
        """A string, number or bare word value (for PROPERTIES)."""
        tok = self.next()
        return tok.text

    def punct(self, kind: TokenType) -> None:
        tok = self.next()
        if tok.token_type != kind:
            raise self.error(f"expected '{_PUNCT_TEXT.get(kind, kind.name)}'", tok)

    def accept_punct(self, kind: TokenType) -> bool:
        tok = self.peek()
        if tok is not None and tok.token_type == kind:
            self.pos += 1
            return True
        return False

    def rest(self) -> str:
        """Raw text from the current token to the end of the statement."""
        if self.at_end():
            return ""
        text = self.text[self.tokens[self.pos].start :]
        self.pos = len(self.tokens)
        return text.strip()

    def raw_between(self, start: int, stop: int) -> str:
        """Raw text of tokens[start:stop]."""
        if start >= stop:
            return ""
        return self.text[self.tokens[start].start : self.tokens[stop - 1].end + 1]

    def error(self, what: str, tok: Token | None = None) -> SqlSyntaxError:
        tok = tok or self.peek()
        where = f"near '{tok.text}'" if tok is not None else "at end of statement"
        return SqlSyntaxError(f"{what} {where} in: {_clip(self.text)}")


_PUNCTUATION = {
    TokenType.L_PAREN,
    TokenType.R_PAREN,
    TokenType.COMMA,
    TokenType.SEMICOLON,
    TokenType.EQ,
    TokenType.DOT,
}
_PUNCT_TEXT = {
    TokenType.L_PAREN: "(",
    TokenType.R_PAREN: ")",
    TokenType.COMMA: ",",
    TokenType.EQ: "=",
}


def _clip(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def parse_name(text: str) -> TableName:
    """A table name as a user writes it, parts back-quoted where Spark needs them:
    ```my-ns`.t`` is two parts, not one split at its dots."""
    stream = TokenStream(text)
    name = stream.name()
    if not stream.at_end():
        raise stream.error("expected a table name")
    return name


def namespace_shown(text: str) -> str:
    """A namespace as Spark's SHOW NAMESPACES and currentDatabase() give it: back-quoted
    when it needs quoting (```my-ns```), plain otherwise. A nested one (``a.b``) is
    returned as given."""
    try:
        parts = parse_name(text).parts
    except SqlSyntaxError:  # not a name this grammar reads: as given
        return text
    return parts[0] if len(parts) == 1 else text
