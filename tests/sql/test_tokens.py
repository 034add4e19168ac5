"""The statement tokenizer used from several threads at once (the scheduler refreshes
in threads; users share a Lakehouse between threads): each call reads its own text."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from dyntables.sql.tokens import tokenize


def _statement(i: int) -> str:
    cols = ", ".join(f"t{i}.c{j} AS a{i}_{j}" for j in range(300))
    return f"SELECT {cols} FROM t{i} WHERE t{i}.s LIKE 'x{i}%'"


def test_threads_tokenizing_at_once_each_read_their_own_text() -> None:
    texts = [_statement(i) for i in range(4)]
    expected = [[t.text for t in tokenize(text)] for text in texts]

    def read(i: int) -> bool:
        return all([t.text for t in tokenize(texts[i])] == expected[i] for _ in range(15))

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(read, [0, 1, 2, 3] * 2))
