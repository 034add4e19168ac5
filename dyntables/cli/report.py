"""The CLI's error contract: one line on stderr, the traceback only on request.

Scripts match on ``error [CODE]:``; a traceback would bury that line, so it is printed
only with ``--debug`` and before the line, which stays the last thing on screen.
"""

from __future__ import annotations

import traceback
from typing import TextIO

from dyntables.errors import DynTablesError

INTERNAL_CODE = "INTERNAL"


def one_line(exc: BaseException) -> str:
    """``error [CODE]: message``; anything that is not ours is reported as INTERNAL."""
    if isinstance(exc, DynTablesError):
        return exc.one_line()
    lines = str(exc).strip().splitlines()
    detail = f": {' '.join(lines[0].split())}" if lines else ""
    return f"error [{INTERNAL_CODE}]: {type(exc).__name__}{detail}"


def report_error(exc: BaseException, stream: TextIO, *, debug: bool = False) -> None:
    if debug:
        traceback.print_exception(exc, file=stream)
    print(one_line(exc), file=stream, flush=True)
