"""Statements on a dynamic table overlapping each other: a refresh about to publish, a
CREATE OR REPLACE, an ALTER, the scheduler's suspension. Each pair ends as if one had
run after the other, never as a mix of both (helper-32 found two mixes: a refresh
publishing the replaced query's rows under the new query, and an ALTER putting the
replaced query back).

Each overlap is made at a known point: a refresh is held at one of its named steps
(``faults``), an ALTER just before its commit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dyntables import Lakehouse
from dyntables.catalog.definition import PREFIX, RefreshState
from dyntables.catalog.iceberg import IcebergTable, load_table
from dyntables.errors import ChangedMeanwhileError, RefreshFailedError
from dyntables.refresh import faults
from tests.conftest import rows
from tests.oracle import assert_oracle

OLD = "SELECT k, SUM(v) AS total, MAX(v) AS hi FROM {src} GROUP BY k"
NEW = "SELECT k, SUM(v) * 10 AS total, MAX(v) AS hi FROM {src} GROUP BY k"


@pytest.fixture
def grouped(lh: Lakehouse, unique) -> tuple[str, str]:
    """A source and a grouped dynamic table over it (MAX keeps aggregate state)."""
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('a', 2), ('b', 5);
        CREATE DYNAMIC TABLE {dt} AS {OLD.format(src=src)}
        """
    )
    return src, dt


@pytest.fixture
def no_faults() -> Iterator[None]:
    yield
    faults.install(None)


def _definition(lh: Lakehouse, dt: str) -> tuple[str, str]:
    """The query and state ``dt``'s properties hold."""
    table = load_table(lh.spark, lh.qualify(dt))
    assert table is not None
    props = table.properties()
    return props[PREFIX + "query"], props[PREFIX + "state"]


def _in_thread(name: str, run: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """``run`` in a thread named ``name``; the list gets what it returned or raised."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(run())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread, out


@pytest.mark.parametrize("point", ["before_publish", "after_publish_state"])
def test_a_replace_waits_for_a_refresh_about_to_publish(
    lh: Lakehouse, grouped, no_faults, point: str
) -> None:
    """The refresh publishes the old query's rows, then the replace rebuilds: the table
    holds the new query's rows. Before, the replace ran at once and the refresh then
    published the old query's rows under the new query, recorded as INCREMENTAL, and
    every later refresh was NO_DATA or built on them (helper-32)."""
    src, dt = grouped
    lh.sql(f"INSERT INTO {src} VALUES ('a', 4), ('c', 7)")
    held, release = threading.Event(), threading.Event()

    def hold(reached: str) -> None:
        if reached == point and threading.current_thread().name == "refresher":
            held.set()
            release.wait(3)  # the replace waits for the lease meanwhile

    faults.install(hold)
    thread, out = _in_thread("refresher", lambda: lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first())
    assert held.wait(60)
    started = time.monotonic()
    lh.sql(f"CREATE OR REPLACE DYNAMIC TABLE {dt} AS {NEW.format(src=src)}")
    waited = time.monotonic() - started
    release.set()
    thread.join(60)
    faults.install(None)
    assert waited >= 2  # the refresh held the lease until its end
    assert out[0].state == "SUCCEED" and out[0].refresh_mode == "INCREMENTAL"
    assert _definition(lh, dt)[0] == NEW.format(src=src)
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [("a", 70, 4), ("b", 50, 5), ("c", 70, 7)]
    assert_oracle(lh, dt)
    lh.sql(f"DELETE FROM {src} WHERE k = 'a' AND v = 4")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [("a", 30, 2), ("b", 50, 5), ("c", 70, 7)]
    assert_oracle(lh, dt)


def test_a_publish_over_a_refresh_state_it_did_not_start_from_commits_nothing(
    lh: Lakehouse, grouped, no_faults
) -> None:
    """What a replace or another process's refresh leaves, committed between the
    refresh's last check and its publish (a lease taken over as stale, a catalog
    shared without the lease folder): the publish refuses to land on it."""
    src, dt = grouped
    lh.sql(f"INSERT INTO {src} VALUES ('c', 7)")
    name = lh.qualify(dt)

    def rewrite_state(reached: str) -> None:
        if reached == "before_publish":
            table = load_table(lh.spark, name)
            assert table is not None
            table.set_properties({PREFIX + "refresh.id": "another"})

    faults.install(rewrite_state)
    with pytest.raises(RefreshFailedError, match="nothing was published"):
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    faults.install(None)
    table = load_table(lh.spark, name)
    assert table is not None
    state = RefreshState.from_properties(table.properties())
    assert state is not None and state.refresh_id == "another"
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [("a", 3, 2), ("b", 5, 5)]


def test_a_publish_over_rows_written_since_its_check_commits_nothing(
    lh: Lakehouse, grouped, no_faults
) -> None:
    """A write to the table itself between the refresh's check and its publish: the
    refresh is discarded, as when the write comes before the check, and the next one
    recomputes the table."""
    src, dt = grouped
    lh.sql(f"INSERT INTO {src} VALUES ('c', 7)")
    fired: list[str] = []

    def outside_write(reached: str) -> None:
        if reached == "before_publish" and not fired:
            fired.append(reached)
            lh.spark.sql(f"INSERT INTO {lh.qualify(dt).sql()} VALUES ('z', 0, 0)")

    faults.install(outside_write)
    with pytest.raises(RefreshFailedError, match="changed while it was being refreshed"):
        lh.sql(f"REFRESH DYNAMIC TABLE {dt}")
    faults.install(None)
    again = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert (again.refresh_mode, again.state) == ("FULL", "SUCCEED")
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [("a", 3, 2), ("b", 5, 5), ("c", 7, 7)]
    assert_oracle(lh, dt)


@pytest.fixture
def held_commit(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Holds a property commit made by a thread named "held" until released: the
    commit then lands on whatever was committed meanwhile."""
    held, release = threading.Event(), threading.Event()
    commit = IcebergTable.set_properties

    def set_properties(self: IcebergTable, *args: Any, **kwargs: Any) -> None:
        if threading.current_thread().name == "held":
            held.set()
            assert release.wait(60)
        commit(self, *args, **kwargs)

    monkeypatch.setattr(IcebergTable, "set_properties", set_properties)
    return held, release


def test_an_alter_overlapping_a_replace_keeps_the_new_query(
    lh: Lakehouse, grouped, held_commit
) -> None:
    """The ALTER wrote back the whole definition it had read, the replaced query with
    it: the table held the new query's rows under the old query, and the next refresh
    mixed both (helper-32). It now writes the state it changes, and nothing else."""
    src, dt = grouped
    held, release = held_commit
    thread, out = _in_thread("held", lambda: lh.sql(f"ALTER DYNAMIC TABLE {dt} SUSPEND"))
    assert held.wait(60)
    lh.sql(f"CREATE OR REPLACE DYNAMIC TABLE {dt} AS {NEW.format(src=src)}")
    release.set()
    thread.join(60)
    assert not isinstance(out[0], Exception), out[0]
    assert _definition(lh, dt) == (NEW.format(src=src), "SUSPENDED")
    lh.sql(f"INSERT INTO {src} VALUES ('b', 1)")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
    assert rows(lh.sql(f"SELECT * FROM {dt}")) == [("a", 30, 2), ("b", 60, 5)]
    assert_oracle(lh, dt)


def test_a_refresh_mode_checked_against_a_replaced_query_is_not_set(
    lh: Lakehouse, grouped, held_commit
) -> None:
    """REFRESH_MODE = INCREMENTAL is checked against the query the ALTER read: over a
    query replaced meanwhile it is refused, and the replace stands."""
    src, dt = grouped
    held, release = held_commit
    thread, out = _in_thread(
        "held", lambda: lh.sql(f"ALTER DYNAMIC TABLE {dt} SET REFRESH_MODE = INCREMENTAL")
    )
    assert held.wait(60)
    lh.sql(f"CREATE OR REPLACE DYNAMIC TABLE {dt} AS {NEW.format(src=src)}")
    release.set()
    thread.join(60)
    assert isinstance(out[0], ChangedMeanwhileError), out[0]
    assert "Run it again" in out[0].message
    assert _definition(lh, dt) == (NEW.format(src=src), "ACTIVE")
    assert lh.sql(f"SHOW DYNAMIC TABLES LIKE '{dt}'").first().refresh_mode == "AUTO"


def test_the_schedulers_suspension_overlapping_a_replace_keeps_the_new_query(
    lh: Lakehouse, grouped, held_commit
) -> None:
    """The scheduler suspends a table after its last allowed failure, the same way."""
    src, dt = grouped
    held, release = held_commit
    registry = lh.commands.registry
    thread, out = _in_thread("held", lambda: registry.suspend(lh.qualify(dt), "failed 5 times"))
    assert held.wait(60)
    lh.sql(f"CREATE OR REPLACE DYNAMIC TABLE {dt} AS {NEW.format(src=src)}")
    release.set()
    thread.join(60)
    assert out == [True]
    assert _definition(lh, dt) == (NEW.format(src=src), "SUSPENDED")
    assert lh.sql(f"SHOW DYNAMIC TABLES LIKE '{dt}'").first().suspended_reason == ("failed 5 times")
