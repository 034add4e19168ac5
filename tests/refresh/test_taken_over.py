"""A refresh paused past its lease (SIGSTOP, a VM pause) while another process took the
lease over: what that process did meanwhile is stood in for here by the fault hook,
which writes the lease or drops the table at a step of the paused refresh (helper-33).
"""

from __future__ import annotations

import json
import os

import pytest

from dyntables import Lakehouse
from dyntables.catalog.iceberg import load_table
from dyntables.errors import RefreshFailedError, TableNotFoundError
from dyntables.refresh import faults
from dyntables.refresh.locks import RefreshLocks
from tests.oracle import assert_oracle

QUERY = "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM {src} GROUP BY k"


@pytest.fixture
def at():
    def install(point: str, action) -> None:
        def hook(reached: str) -> None:
            if reached == point:
                faults.install(None)
                action()

        faults.install(hook)

    yield install
    faults.install(None)


def _pipeline(lh: Lakehouse, unique) -> tuple[str, str]:
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"""
        CREATE TABLE {src} (k STRING, v INT);
        INSERT INTO {src} VALUES ('a', 1), ('b', 2);
        CREATE DYNAMIC TABLE {dt} AS {QUERY.format(src=src)};
        INSERT INTO {src} VALUES ('a', 5), ('c', 7)
        """
    )
    return src, dt


def _lease_path(lh: Lakehouse, dt: str) -> str:
    registry = lh.commands.registry
    locks = RefreshLocks(lh.spark, registry.system_root)
    return f"{locks.root}/{registry.get(lh.qualify(dt)).dt_id}.lock"


def test_a_holder_whose_lease_was_taken_over_does_not_maintain_the_table(
    lh: Lakehouse, unique, at
) -> None:
    """Expiring snapshots without the lease could expire one the new holder staged."""
    src, dt = _pipeline(lh, unique)
    path = _lease_path(lh, dt)
    locks = RefreshLocks(lh.spark, lh.commands.registry.system_root)
    at("after_publish", lambda: locks._write(path, "another-process", overwrite=True))
    try:
        outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    finally:
        os.remove(path)  # its owner, "another-process", is not there to release it
    assert (outcome.state, outcome.refresh_mode) == ("SUCCEED", "INCREMENTAL")
    [row] = lh.sql(
        f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' AND job_id = '{outcome.job_id}'"
    ).collect()
    stats = json.loads(row.stats)
    assert stats["maintenance"].startswith("skipped")
    assert not any(key.startswith("expired_snapshots") for key in stats)
    assert_oracle(lh, dt)
    # with its lease, the next refresh maintains again
    lh.sql(f"INSERT INTO {src} VALUES ('d', 1)")
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    [row] = lh.sql(
        f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' AND job_id = '{outcome.job_id}'"
    ).collect()
    assert "maintenance" not in json.loads(row.stats)


@pytest.mark.parametrize("point", ["after_pin_sources", "before_publish"])
def test_a_table_dropped_under_a_paused_refresh_is_said_to_be_dropped(
    lh: Lakehouse, unique, at, point: str
) -> None:
    """Iceberg's word for it was a missing metadata file, or Python's a zip() of
    unequal lengths."""
    src, dt = _pipeline(lh, unique)
    registry = lh.commands.registry
    found = registry.get(lh.qualify(dt))
    # what DROP does, without the lease this (paused) refresh holds
    at(point, lambda: registry.trash.drop(found.name, found.dt_id, found.retention_days))
    with pytest.raises(RefreshFailedError) as failed:
        registry.refresher.refresh(found)
    assert failed.value.code == "DT_CHANGED_MEANWHILE"
    assert f"{found.name} was dropped while it was being refreshed" in str(failed.value)
    assert "nothing was published" in str(failed.value)
    lh.sql(f"UNDROP DYNAMIC TABLE {dt}")
    assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().state == "SUCCEED"
    assert_oracle(lh, dt)


def test_a_table_dropped_while_its_refresh_waited_is_said_to_be_dropped(
    lh: Lakehouse, unique
) -> None:
    _, dt = _pipeline(lh, unique)
    registry = lh.commands.registry
    found = registry.get(lh.qualify(dt))
    lh.sql(f"DROP DYNAMIC TABLE {dt}")
    assert load_table(lh.spark, found.name) is None
    with pytest.raises(TableNotFoundError, match="was dropped before this refresh could start"):
        registry.refresher.refresh(found)
