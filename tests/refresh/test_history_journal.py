"""History rows are journaled (no Spark job per refresh) and moved into the table once."""

from __future__ import annotations

from datetime import UTC, datetime

from dyntables import Lakehouse
from dyntables.refresh.history import HistoryRecord


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
