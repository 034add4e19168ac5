"""Reading a table's metadata before a commit, on a Hadoop catalog shared by two
processes: the version hint can name a file the other process's commit has just
deleted. A pure unit over a fake of Iceberg's TableOperations."""

from __future__ import annotations

import pytest

from dyntables.catalog.iceberg import COMMIT_ATTEMPTS, refreshed


class _Ops:
    def __init__(self, failures: int, message: str) -> None:
        self.failures = failures
        self.message = message
        self.calls = 0

    def refresh(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(self.message)
        return "metadata"


def test_a_metadata_file_deleted_under_the_read_is_read_again() -> None:
    ops = _Ops(2, "ValidationException: Metadata file for version 7 is missing")
    assert refreshed(ops) == "metadata" and ops.calls == 3


def test_other_errors_and_a_lasting_one_are_raised() -> None:
    with pytest.raises(RuntimeError, match="Permission denied"):
        refreshed(_Ops(1, "Permission denied"))
    lasting = _Ops(COMMIT_ATTEMPTS, "Metadata file for version 7 is missing")
    with pytest.raises(RuntimeError, match="is missing"):
        refreshed(lasting)
    assert lasting.calls == COMMIT_ATTEMPTS
