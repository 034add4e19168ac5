"""Which failures of an incremental refresh a recompute answers, and under which reason
(refresh/planner.py): pure, over the exception types PySpark raises."""

from __future__ import annotations

from pyspark.errors import AnalysisException, ParseException

from dyntables.ivm import aggregate as agg
from dyntables.refresh.incremental import StateMissingError
from dyntables.refresh.planner import (
    DELTA_ARITHMETIC_ERROR,
    DELTA_SQL_INVALID,
    INCONSISTENT_STATE,
    STATE_MISSING,
    SUM_OVERFLOW,
    _first_line,
    _incremental_failure,
)


def test_a_check_failing_at_run_time_is_an_inconsistent_state_or_an_overflow() -> None:
    assert _incremental_failure(RuntimeError("dyntables: inconsistent aggregate state")) == (
        INCONSISTENT_STATE
    )
    assert _incremental_failure(RuntimeError(f"job aborted: {agg.OVERFLOW}")) == SUM_OVERFLOW


def test_sql_spark_refuses_is_not_taken_for_a_failed_check() -> None:
    # the message quotes the SQL, RAISE_ERROR('dyntables: ...') included
    quoted = "\n[PARSE_SYNTAX_ERROR] near 'ö'\n== SQL ==\nSELECT RAISE_ERROR('dyntables: x')"
    assert _incremental_failure(ParseException(message=quoted)) == DELTA_SQL_INVALID
    assert _first_line(quoted) == "[PARSE_SYNTAX_ERROR] near 'ö'"
    # what the query reads is gone (a temporary function): the refresh fails and says so
    plan = "[UNRESOLVED_ROUTINE] plus_one\n'Project [raise_error(dyntables: x)]"
    assert _incremental_failure(AnalysisException(message=plan)) is None


def test_any_other_error_is_the_refresh_s_own() -> None:
    assert _incremental_failure(OSError("disk full")) is None


def test_state_gone_mid_refresh_is_rebuilt_as_state_missing() -> None:
    assert _incremental_failure(StateMissingError("dyntables: state table x is missing")) == (
        STATE_MISSING
    )


def test_an_ansi_arithmetic_error_in_the_delta_recomputes() -> None:
    """The delta evaluates expressions on rows the query never meets; a recompute fails
    only if the query itself does (corpus bug-ansi-error-in-a-delta-only)."""
    for text in (
        "[ARITHMETIC_OVERFLOW] long overflow. Use 'try_add' to tolerate overflow",
        "Job aborted: org.apache.spark.SparkArithmeticException: [DIVIDE_BY_ZERO] Division by zero.",
        "[CAST_OVERFLOW] The value 1e40 of the type DOUBLE cannot be cast to INT",
        "SparkArithmeticException: [BINARY_ARITHMETIC_OVERFLOW] 100S * 30000S caused overflow.",
        "[INTERVAL_ARITHMETIC_OVERFLOW] Integer overflow while operating with intervals.",
        'Invalid date \'FEBRUARY 30\'. If necessary set "spark.sql.ansi.enabled" to "false"',
        "java.time.DateTimeException: year 10000 is out of range",
    ):
        assert _incremental_failure(RuntimeError(text)) == DELTA_ARITHMETIC_ERROR
    # unresolved SQL is never an arithmetic error, whatever it quotes
    quoted = "[UNRESOLVED_ROUTINE] f\n'Project [a / b] -- [DIVIDE_BY_ZERO]"
    assert _incremental_failure(AnalysisException(message=quoted)) is None
