#!/usr/bin/env bash
# Spark 3.5 needs a Java 17+ runtime; say how to get one instead of failing later
# inside Spark with a cryptic gateway error.
set -euo pipefail
JAVA="java"
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA="$JAVA_HOME/bin/java"; fi
if ! command -v "$JAVA" >/dev/null 2>&1; then
  cat >&2 <<'MSG'
error: Java 17 or newer is required (Spark runs on the JVM) and none was found on PATH.
  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless
  macOS:         brew install openjdk@17   (then follow brew's PATH hint)
  Other:         install a JDK 17 (e.g. Eclipse Temurin) and put its bin/ on PATH or set JAVA_HOME.
MSG
  exit 1
fi
ver=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -1)
if [ -z "$ver" ] || [ "$ver" -lt 17 ]; then
  echo "error: Java 17 or newer is required, found '${ver:-unknown}' at $(command -v "$JAVA"). Install a JDK 17 and put it first on PATH or set JAVA_HOME." >&2
  exit 1
fi
