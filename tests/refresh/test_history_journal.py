"""History rows are journaled (no Spark job per refresh) and moved into the table once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from dyntables import Lakehouse
from dyntables.refresh.history import FLUSH_EVERY, HistoryRecord


def _record(job_id: str, name: str) -> HistoryRecord:
    now = datetime.now(UTC)
    return HistoryRecord(
        "lakehouse",
        "public",
        name,
        "default",
        now,
        now,
        7,
        "SUCCEED",
        "MANUAL",
        None,
        "NO_DATA",
        None,
        "[]",
        '{"rows_inserted":"0"}',
        None,
        job_id,
    )


def test_journal_moves_into_the_table_once_even_after_a_crash_mid_move(
    lh: Lakehouse, unique
) -> None:
    name = unique("journaled")
    history = lh.commands.registry.history
    history.append([_record(f"{name}-1", name)])
    history.append([_record(f"{name}-2", name)])
    # read through SQL on the raw table: the journal is moved in first
    raw = lh.sql(
        f"SELECT job_id, duration_ms FROM lakehouse.dyntables_sys.refresh_history WHERE name = '{name}'"
    )
    assert sorted(tuple(r) for r in raw.collect()) == [(f"{name}-1", 7), (f"{name}-2", 7)]
    # a move that committed but crashed before deleting its journal files: not applied twice
    history.append([_record(f"{name}-3", name)])
    original = history._fs.delete
    history._fs.delete = lambda path: None  # type: ignore[method-assign]
    try:
        assert history.flush() == 1
    finally:
        history._fs.delete = original  # type: ignore[method-assign]
    assert history.flush() == 1  # the same file again, already in the table
    shown = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{name}'").collect()
    assert sorted(r.job_id for r in shown) == [f"{name}-1", f"{name}-2", f"{name}-3"]
    assert shown[0].duration == "0 00:00:00.007000000"
    assert history.flush() == 0


def test_a_torn_journal_file_is_set_aside(lh: Lakehouse, unique) -> None:
    name = unique("torn")
    history = lh.commands.registry.history
    history.append([_record(f"{name}-1", name)])
    history._fs.write_text(
        f"{history._journal}/00000000000000000000-torn.json", '[{"workspace_na', overwrite=True
    )
    assert history.flush() == 1
    assert history._fs.list_files(history._journal) == []
    assert history._fs.exists(f"{history._journal}_unreadable/00000000000000000000-torn.json")


def test_a_journal_file_is_written_where_readers_do_not_look(lh: Lakehouse, unique) -> None:
    """A flush in another process listed a journal file its writer had created but not
    yet written, set it aside as torn, and the row never reached the history
    (helper-24: 372 of 30,000 rows lost). A file is now written under a name readers
    skip, then renamed into place whole."""
    name = unique("whole")
    history = lh.commands.registry.history
    fs = history._fs
    original = fs.write_text
    seen: list[tuple[str, bool]] = []

    def write_text(path: str, text: str, overwrite: bool = True) -> None:
        original(path, text, overwrite)
        seen.append((path, path in fs.list_files(history._journal)))

    fs.write_text = write_text  # type: ignore[method-assign]
    try:
        history.append([_record(f"{name}-1", name)])
    finally:
        fs.write_text = original  # type: ignore[method-assign]
    assert seen and not any(listed for _, listed in seen), seen
    shown = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{name}'").collect()
    assert [r.job_id for r in shown] == [f"{name}-1"]


def test_a_refresh_that_committed_stays_succeeded_when_the_journal_cannot_move(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's move into the table, due every FLUSH_EVERY rows, failed (another
    process held it for over a minute): the refresh had published, yet it was reported
    FAILED and recorded twice (helper-24)."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1);
        CREATE DYNAMIC TABLE {dt} AS SELECT k, v FROM {src};
        INSERT INTO {src} VALUES ('b', 2)
        """
    )
    history = lh.commands.registry.history

    def flush() -> int:
        raise TimeoutError("the refresh history journal is being moved by another process")

    monkeypatch.setattr(history, "flush", flush)
    monkeypatch.setattr(history, "_written", FLUSH_EVERY)
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert (outcome.state, outcome.refresh_mode) == ("SUCCEED", "INCREMENTAL")
    monkeypatch.undo()
    shown = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}'").collect()
    assert sorted((r.state, r.refresh_mode) for r in shown) == [
        ("SUCCEED", "FULL"),
        ("SUCCEED", "INCREMENTAL"),
    ]


def test_a_refresh_recorded_twice_in_one_batch_is_one_row(lh: Lakehouse, unique) -> None:
    """A holder paused past its lease records its row after the process that took the
    lease over recorded it from the commit (helper-33): both rows in one journal."""
    name = unique("twice")
    history = lh.commands.registry.history
    history.flush()
    first, again = _record(f"{name}-1", name), _record(f"{name}-1", name)
    again = replace(again, stats='{"rows_inserted":"0","maintenance":"done"}')
    history.append([first])
    history.append([again])
    history.append([_record(f"{name}-2", name)])
    assert history.flush() == 3
    shown = lh.sql(f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{name}'").collect()
    assert sorted(r.job_id for r in shown) == [f"{name}-1", f"{name}-2"]
    assert "maintenance" in next(r.stats for r in shown if r.job_id == f"{name}-1")
