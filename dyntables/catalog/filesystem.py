"""Hadoop FileSystem calls through the JVM, so the same code works on a local folder,
HDFS or an object store — whatever the catalog's warehouse lives on.

Small files on a local warehouse (leases, history journal) are handled by Python's own
file calls: the same semantics (an exclusive create is atomic), without five py4j round
trips per file, which were most of a NO_DATA refresh's cost.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from dyntables.engine.jvm import java_class


def _local(path: str) -> str | None:
    """The OS path of a local-file URI or plain path; None for any other scheme."""
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif path.startswith("file:"):
        path = path[len("file:") :]
    elif "://" in path or not path.startswith("/"):
        return None
    return path if path.startswith("/") else None


class FileSystem:
    def __init__(self, spark: Any) -> None:
        self._hadoop_path = java_class(spark, "org.apache.hadoop.fs.Path")
        self._io_utils = java_class(spark, "org.apache.commons.io.IOUtils")
        self._conf = spark._jsc.hadoopConfiguration()

    def _path(self, path: str) -> tuple[Any, Any]:
        jpath = self._hadoop_path(path)
        return jpath, jpath.getFileSystem(self._conf)

    def exists(self, path: str) -> bool:
        local = _local(path)
        if local is not None:
            return os.path.exists(local)
        jpath, fs = self._path(path)
        return bool(fs.exists(jpath))

    def move(self, src: str, dst: str) -> None:
        jdst, fs = self._path(dst)
        fs.mkdirs(jdst.getParent())
        if not self._rename(src, dst):
            raise OSError(f"could not move {src} to {dst}")

    def _rename(self, src: str, dst: str) -> bool:
        """Hadoop's rename: False when ``src`` is gone or ``dst`` exists."""
        jsrc, fs = self._path(src)
        jdst, _ = self._path(dst)
        return bool(fs.rename(jsrc, jdst))

    def take(self, path: str, to: str) -> bool:
        """Move file ``path`` to the new, unique name ``to``, atomically: of several
        callers taking one file, one succeeds; False for the others (gone)."""
        local, target = _local(path), _local(to)
        if local is not None and target is not None:
            try:
                os.rename(local, target)
            except FileNotFoundError:
                return False
            return True
        return self._rename(path, to)

    def put_back(self, path: str, to: str) -> bool:
        """Move file ``path`` to ``to`` only if nothing is at ``to``; False if something is."""
        local, target = _local(path), _local(to)
        if local is not None and target is not None:
            try:
                os.link(local, target)  # never replaces, unlike a rename
            except FileExistsError:
                return False
            os.unlink(local)
            return True
        return self._rename(path, to)

    def write_text(self, path: str, text: str, overwrite: bool = True) -> None:
        """Write a small file; with ``overwrite=False`` the create is atomic and fails if
        the file exists (that is what the refresh lease relies on)."""
        local = _local(path)
        if local is not None:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "w" if overwrite else "x", encoding="utf-8") as out:
                out.write(text)
            return
        jpath, fs = self._path(path)
        out = fs.create(jpath, overwrite)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()

    def publish_text(self, path: str, text: str) -> None:
        """Write a new small file so that a reader listing the folder sees it whole or
        not at all: written under a hidden name (``list_files`` skips dot-names), then
        renamed into place (atomic on a local disk and HDFS)."""
        parent, name = path.rsplit("/", 1)
        hidden = f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
        self.write_text(hidden, text, overwrite=False)
        if not self.take(hidden, path):
            raise OSError(f"could not move {hidden} to {path}")

    def read_text(self, path: str) -> str:
        local = _local(path)
        if local is not None:
            with open(local, encoding="utf-8") as f:
                return f.read()
        jpath, fs = self._path(path)
        stream = fs.open(jpath)
        try:
            data = self._io_utils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def modified_seconds(self, path: str) -> float:
        local = _local(path)
        if local is not None:
            return os.path.getmtime(local)
        jpath, fs = self._path(path)
        return float(fs.getFileStatus(jpath).getModificationTime()) / 1000.0

    def list_dirs(self, path: str) -> list[str]:
        jpath, fs = self._path(path)
        if not fs.exists(jpath):
            return []
        return [str(s.getPath().toString()) for s in fs.listStatus(jpath) if s.isDirectory()]

    def list_files(self, path: str) -> list[str]:
        """Files directly under ``path``, oldest name first; [] if it does not exist."""
        local = _local(path)
        if local is not None:
            if not os.path.isdir(local):
                return []
            names = (n for n in os.listdir(local) if not n.startswith("."))
            return sorted(
                f"{path.rstrip('/')}/{n}" for n in names if os.path.isfile(os.path.join(local, n))
            )
        jpath, fs = self._path(path)
        if not fs.exists(jpath):
            return []
        return sorted(
            str(s.getPath().toString())
            for s in fs.listStatus(jpath)
            if s.isFile() and not str(s.getPath().getName()).startswith(".")
        )

    def delete(self, path: str) -> None:
        local = _local(path)
        if local is not None and not os.path.isdir(local):
            try:
                os.remove(local)
            except FileNotFoundError:
                pass
            return
        jpath, fs = self._path(path)
        fs.delete(jpath, True)
