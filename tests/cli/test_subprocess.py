"""``python -m dyntables`` for real: what a user sees on stderr, with nothing injected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dyntables

REPO = Path(dyntables.__file__).resolve().parents[1]


def run_dyntables(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DYNTABLES_") and k not in ("PYTHONPATH", "SPARK_HOME")
    }
    clean.update(PYTHONPATH=str(REPO), **env)
    return subprocess.run(
        [sys.executable, "-m", "dyntables", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_bad_statement_prints_exactly_one_line_on_stderr(tmp_path: Path) -> None:
    """Spark starts for real, so any log4j or JVM chatter would show up here."""
    done = run_dyntables(
        "--warehouse", str(tmp_path / "wh"), "sql", "-e", "SELECT * FROM no_such_table",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error [TABLE_NOT_FOUND]: table or view 'no_such_table' not found")


def test_version_runs_without_java(tmp_path: Path) -> None:
    """No Java on PATH: the command would fail with JAVA_NOT_FOUND if it started Spark."""
    done = run_dyntables(
        "version", cwd=tmp_path, JAVA_HOME=str(tmp_path / "no-java"), PATH=str(tmp_path)
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == f"dyntables {dyntables.__version__}"
    assert done.stdout.splitlines()[2].startswith("iceberg 1.10.2 ")
