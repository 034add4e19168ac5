#!/usr/bin/env bash
# Sets up .venv at the repository root with the pinned dependencies and checks Java.
# Idempotent and fast when already done: the Makefile only calls it when the stamp is
# older than pyproject.toml / requirements.lock.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/check_java.sh

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "error: $PYTHON not found; install Python 3.10+ and re-run (or set PYTHON=/path/to/python3)." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
echo "==> installing pinned dependencies into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.lock
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
touch .venv/.installed
echo "==> ready"
