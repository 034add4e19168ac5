"""Refresh job ids, shaped like the seeds' (timestamp + random suffix)."""

from __future__ import annotations

import secrets
import string
import time

_ALPHABET = string.ascii_lowercase + string.digits


def new_job_id() -> str:
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime()) + f"{int(time.time() * 1000) % 1000:03d}"
    return stamp + "".join(secrets.choice(_ALPHABET) for _ in range(12))


def now_ms() -> int:
    return int(time.time() * 1000)
