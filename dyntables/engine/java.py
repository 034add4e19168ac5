"""Java 17+ check, done before Spark is started so a missing JVM is a clear message."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache

from dyntables.errors import JavaNotFoundError

INSTALL_HINT = (
    "install a Java 17+ runtime and put it on PATH or set JAVA_HOME "
    "(Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless; macOS: brew install openjdk@17)"
)


@lru_cache(maxsize=1)
def check_java() -> int:
    """Return the Java major version, or raise JavaNotFoundError saying how to install it."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(java_home, "bin", "java") if java_home else None
    java = candidate if candidate and os.access(candidate, os.X_OK) else shutil.which("java")
    if not java:
        raise JavaNotFoundError(
            f"Java 17 or newer is required to run Spark and none was found: {INSTALL_HINT}"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"could not run '{java} -version' ({exc}): {INSTALL_HINT}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise JavaNotFoundError(
            f"could not read the Java version from '{java} -version': {INSTALL_HINT}"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    if major < 17:
        raise JavaNotFoundError(
            f"Java {major} found at {java}, but Java 17 or newer is required: {INSTALL_HINT}"
        )
    return major
