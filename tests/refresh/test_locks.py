"""The refresh lease across processes: one holder at a time, also when holders die or
pause (helper-24). Each RefreshLocks stands for a process; the files are real."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from dyntables import Lakehouse
from dyntables.refresh.locks import RefreshLocks


def _stale(path: str) -> None:
    old = time.time() - 60
    os.utime(path, (old, old))  # its holder's heartbeat stopped a minute ago


def test_two_takeovers_of_one_stale_lease_leave_one_holder(lh: Lakehouse, tmp_path: Path) -> None:
    """Process 2 found the lease stale and was descheduled; process 1 took it over and
    made its own; process 2 then deleted process 1's fresh lease and made its own."""
    root = str(tmp_path)
    dead, p1, p2 = (RefreshLocks(lh.spark, root, stale_after=10.0) for _ in range(3))
    assert dead.acquire("dt", wait=False) is not None  # then killed: never released
    path = f"{root}/_locks/dt.lock"
    _stale(path)
    p1_holds = threading.Event()
    stat = p2.fs.modified_seconds

    def descheduled(p: str) -> float:
        seconds = stat(p)
        p1_holds.wait(5)
        return seconds

    p2.fs.modified_seconds = descheduled  # type: ignore[method-assign]
    got = {}

    def run(name: str, locks: RefreshLocks) -> None:
        got[name] = locks.acquire("dt", wait=True, timeout=3)
        if name == "p1":
            p1_holds.set()

    t2 = threading.Thread(target=run, args=("p2", p2))
    t2.start()
    time.sleep(0.1)
    run("p1", p1)
    t2.join()
    assert got["p1"] is not None and got["p2"] is None
    assert [n for n in os.listdir(f"{root}/_locks")] == ["dt.lock"]


def test_a_paused_holder_taken_over_does_not_release_its_successor(
    lh: Lakehouse, tmp_path: Path
) -> None:
    root = str(tmp_path)
    a, b, c = (RefreshLocks(lh.spark, root, stale_after=10.0) for _ in range(3))
    held_by_a = a.acquire("dt", wait=False)
    assert held_by_a is not None
    _stale(f"{root}/_locks/dt.lock")  # A paused (SIGSTOP) for a minute
    held_by_b = b.acquire("dt", wait=True, timeout=3)
    assert held_by_b is not None
    held_by_a.release()  # A resumes and finishes
    assert c.acquire("dt", wait=False) is None  # B still holds it
    held_by_b.release()
    assert c.acquire("dt", wait=False) is not None


def test_a_lease_says_whether_it_was_taken_from_a_dead_holder(
    lh: Lakehouse, tmp_path: Path
) -> None:
    root = str(tmp_path)
    dead, alive = (RefreshLocks(lh.spark, root, stale_after=10.0) for _ in range(2))
    assert not alive.stale("dt")  # no lease at all
    first = alive.acquire("dt", wait=False)
    assert first is not None and not first.taken_over and not alive.stale("dt")
    first.release()
    assert dead.acquire("dt", wait=False) is not None  # then killed: never released
    _stale(f"{root}/_locks/dt.lock")
    assert alive.stale("dt")
    taken = alive.acquire("dt", wait=False)
    assert taken is not None and taken.taken_over and not alive.stale("dt")
    taken.release()
