"""One refresh of a table at a time: within a process (threads of a scheduler, a
manual REFRESH) and across processes sharing a catalog (two schedulers, a CLI).

Across processes the lock is a lease file created atomically (create-if-absent) in the
warehouse's system folder and kept fresh by a heartbeat; a lease whose heartbeat stopped
(its holder died) is taken over after ``stale_after`` seconds.

A lease file names its holder's token. The heartbeat and the release touch the file
only while it still names theirs: a holder paused past ``stale_after`` (SIGSTOP, a VM
pause) and taken over deleted its successor's lease when it finished (helper-24). A
takeover first moves the stale file to a name of its own, so that of two processes
that found it stale, the second cannot delete the lease the first has just created.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from dyntables.catalog.filesystem import FileSystem

HEARTBEAT_SECONDS = 5.0
STALE_AFTER_SECONDS = 30.0


class Lease:
    """``taken_over``: its previous holder's heartbeat had stopped (the holder died or
    hung), so whatever that holder did last may be half-recorded."""

    def __init__(
        self,
        locks: RefreshLocks,
        key: str,
        path: str | None,
        token: str = "",
        taken_over: bool = False,
    ) -> None:
        self._locks = locks
        self.key = key
        self.path = path
        self.token = token
        self.taken_over = taken_over
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if path is not None:
            self._thread = threading.Thread(target=self._beat, name=f"lease-{key[:8]}", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                if not self._locks._holds(self.path, self.token):  # type: ignore[arg-type]
                    return  # taken over while this process was paused: not ours to renew
                self._locks._write(self.path, self.token, overwrite=True)  # type: ignore[arg-type]
            except Exception:
                pass

    def held(self) -> bool:
        """Whether the lease is still this holder's: not once another process took it
        over as stale while this one was paused (one small file read)."""
        return self.path is None or self._locks._holds(self.path, self.token)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=HEARTBEAT_SECONDS * 2)
        if self.path is not None:
            try:
                if self._locks._holds(self.path, self.token):
                    self._locks.fs.delete(self.path)
            except Exception:
                pass
        self._locks._local(self.key).release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RefreshLocks:
    def __init__(
        self, spark: Any, root: str | None, stale_after: float = STALE_AFTER_SECONDS
    ) -> None:
        self.fs = FileSystem(spark)
        self.root = root.rstrip("/") + "/_locks" if root else None
        self.stale_after = stale_after
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._guard = threading.Lock()
        self._threads: dict[str, threading.Lock] = {}

    def _local(self, key: str) -> threading.Lock:
        with self._guard:
            return self._threads.setdefault(key, threading.Lock())

    def acquire(self, key: str, wait: bool = True, timeout: float | None = None) -> Lease | None:
        """A lease on ``key``, or None if ``wait`` is false / ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        local = self._local(key)
        if not local.acquire(blocking=wait, timeout=-1 if timeout is None or not wait else timeout):
            return None
        if self.root is None:
            return Lease(self, key, None)
        path = f"{self.root}/{key}.lock"
        token = f"{self.owner}:{uuid.uuid4().hex[:8]}"
        while True:
            if self._create(path, token):
                return Lease(self, key, path, token)
            if self._take_over(path, token):
                return Lease(self, key, path, token, taken_over=True)
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                local.release()
                return None
            time.sleep(0.2)

    def stale(self, key: str) -> bool:
        """Whether ``key``'s lease was left by a holder that died (one file status)."""
        return self.root is not None and self._stale(f"{self.root}/{key}.lock")

    def _stale(self, path: str) -> bool:
        try:
            age = time.time() - self.fs.modified_seconds(path)
        except Exception:  # no lease file
            return False
        return age > self.stale_after

    def _create(self, path: str, token: str) -> bool:
        try:
            self._write(path, token, overwrite=False)
            return True
        except Exception:
            return False

    def _take_over(self, path: str, token: str) -> bool:
        """Held: taken over only if its heartbeat stopped."""
        if not self._stale(path):
            return False
        grave = f"{path}.{uuid.uuid4().hex[:12]}.stale"
        try:
            if not self.fs.take(path, grave):
                return False  # another process took it first
            if time.time() - self.fs.modified_seconds(grave) <= self.stale_after:
                # not the stale file any more: a lease another process has just made;
                # put it back (its holder finds out at its heartbeat if that fails)
                self.fs.put_back(grave, path)
                return False
        except Exception:
            return False
        finally:
            try:
                if self.fs.exists(grave):
                    self.fs.delete(grave)
            except Exception:
                pass
        return self._create(path, token)

    def _holds(self, path: str, token: str) -> bool:
        """Whether the lease file at ``path`` names ``token``."""
        try:
            return bool(json.loads(self.fs.read_text(path)).get("token") == token)
        except Exception:
            return False

    def _write(self, path: str, token: str, overwrite: bool) -> None:
        body = json.dumps({"owner": self.owner, "token": token, "time": time.time()})
        self.fs.write_text(path, body, overwrite=overwrite)
