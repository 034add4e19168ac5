"""The Spark sessions a refresh or a CREATE runs its work in.

Each is a clone of the user's session, so the work sees the user's settings without
changing them, and its own settings (staging, planning for little data) stay its own.
Its jobs are labelled with a job group on the calling thread, which is handed back as
it was when the work ends."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dyntables.catalog.definition import RESULT_SETTINGS, changes_results
from dyntables.refresh.planner import small_data_settings

# Work whose sources and table hold at most this many rows together is planned for
# little data, whatever its mode: on Spark's interpreted evaluation, without adaptive
# execution and with no more shuffle partitions than cores (see
# planner.SMALL_CHANGE_ROWS). Generating and compiling Java code for its plans
# (twenty-odd compilations for a small aggregate's refresh) costs more than compiled
# code saves on so few rows. Measured on this project's machine (scratch A/B,
# alternating refreshes of the seeds' pipeline on a handful of rows, 10 rounds): the
# join layer 0.67 -> 0.51 s, the aggregate 1.02 -> 0.83 s, a rank 0.68 -> 0.54 s; one
# aggregate over 10k rows took as long either way, over 100k rows 1.3x longer
# interpreted. Results are the same either way.
SMALL_DATA_ROWS = 50_000

# the SparkContext properties of the calling thread the work sets (its job group, which
# labels and cancels its jobs, and its scheduler pool)
_THREAD_PROPERTIES = (
    "spark.jobGroup.id",
    "spark.job.description",
    "spark.job.interruptOnCancel",
    "spark.scheduler.pool",
)


# the user's session settings that stage Iceberg writes (write-audit-publish): never
# carried into the work's session
SESSION_STAGING = ("spark.wap.id", "spark.wap.branch")


def rows_together(counts: Iterable[int | None]) -> int | None:
    """What tables holding ``counts`` rows hold together; None when one count is unknown
    (a snapshot whose summary does not say)."""
    total = 0
    for count in counts:
        if count is None:
            return None
        total += count
    return total


# the settings under which Spark reads SQL text otherwise than dyntables reads and
# writes it, at the value dyntables reads it with: a backslash in a string is no
# escape, a backquoted name a regex, set operations bind left to right, 1E2 a DECIMAL,
# GROUP BY names no alias and 1 no position. CREATE refuses a session with another, and
# the work's sessions always have these, for the SQL the work runs is dyntables' writing
SQL_TEXT_SETTINGS = {
    "spark.sql.parser.escapedStringLiterals": "false",
    "spark.sql.parser.quotedRegexColumnNames": "false",
    "spark.sql.legacy.setopsPrecedence.enabled": "false",
    "spark.sql.legacy.exponentLiteralAsDecimal.enabled": "false",
    "spark.sql.groupByAliases": "true",
    "spark.sql.groupByOrdinal": "true",
    "spark.sql.orderByOrdinal": "true",
}


def reads_sql_otherwise(spark: Any) -> tuple[str, str] | None:
    """The setting of ``spark`` under which Spark reads a query's text otherwise than
    dyntables does, and a value dyntables reads it with; None if there is none. Beside
    SQL_TEXT_SETTINGS: a CTE named again inside a query names the inner one to
    dyntables, the outer one to Spark's legacy policy; and with ANSI mode on, "x" is a
    column to Spark where double-quoted identifiers are on, and a comma binds looser
    than JOIN where relation precedence is."""

    def value(key: str) -> str:
        return str(spark.conf.get(key)).lower()

    for key, wanted in SQL_TEXT_SETTINGS.items():
        if value(key) != wanted:
            return key, wanted
    if value("spark.sql.legacy.ctePrecedencePolicy") == "legacy":
        return "spark.sql.legacy.ctePrecedencePolicy", "CORRECTED"
    if value("spark.sql.ansi.enabled") == "true":
        for key in ("spark.sql.ansi.doubleQuotedIdentifiers", "spark.sql.ansi.relationPrecedence"):
            if value(key) == "true":
                return key, "false"
    return None


def uncached_catalogs(spark: Any, keys: Iterable[str]) -> dict[str, str]:
    """Settings that turn off the table cache of every Iceberg catalog configured among
    ``keys`` (``spark``'s keys_set): the work reads and commits metadata through several
    objects, and a cached one did not show a commit made through another. A clone sets
    up its catalogs anew, under its own settings, so the user's session keeps its
    cache."""
    return {
        f"{key}.cache-enabled": "false"
        for key in keys
        if key.startswith("spark.sql.catalog.")
        and key.count(".") == 3
        and "iceberg" in str(spark.conf.get(key)).lower()
    }


def keys_set(spark: Any) -> list[str]:
    """The settings ``spark`` has set: by SET, and those of the SparkConf it started
    with. One py4j call (SQL's ``SET`` takes 60-80 ms)."""
    keys = spark._jsparkSession.conf().getAll().keys().mkString("\u0001")
    return [key for key in str(keys).split("\u0001") if key]


def result_settings(spark: Any) -> dict[str, str]:
    """What CREATE records of ``spark``'s settings (see definition.RESULT_SETTINGS):
    the three every query can depend on, set or not, and every other that
    changes_results it has set. A setting that cannot be changed in a session (a
    static one) cannot be set for a refresh either, so it is not recorded."""
    recorded = {key: str(spark.conf.get(key)) for key in RESULT_SETTINGS}
    others = {
        key: str(spark.conf.get(key))
        for key in keys_set(spark)
        if key not in recorded and changes_results(key) and spark.conf.isModifiable(key)
    }
    defaults = _defaults(spark, others)
    # set to what it is anyway: recording it would only make a CREATE OR REPLACE from a
    # session without it rebuild the table (a refresh unsets it, which is the same)
    recorded.update((k, v) for k, v in others.items() if not _same(v, defaults.get(k)))
    return dict(sorted(recorded.items()))


def _same(value: str, default: str | None) -> bool:
    """Spark reads booleans whatever their case (TRUE is true)."""
    if default is None:
        return False
    if default.lower() in ("true", "false"):
        return value.strip().lower() == default.lower()
    return value == default


def _defaults(spark: Any, keys: Iterable[str]) -> dict[str, str]:
    """What ``keys`` read once unset, as a refresh's session unsets them: Spark's own
    defaults (absent: none). One clone of the session, made only when there are keys."""
    keys = list(keys)
    if not keys:
        return {}
    conf = spark._jsparkSession.cloneSession().conf()
    out = {}
    for key in keys:
        conf.unset(key)
        value = conf.getOption(key)
        if value.isDefined():
            out[key] = str(value.get())
    return out


def work_session(
    spark: Any, settings: Mapping[str, str], rows: int | None, *, only_these: bool = False
) -> Any:
    """A clone of ``spark`` with ``settings`` set, planned for little data when ``rows``
    (what the sources and the table hold together, None if unknown) is at most
    SMALL_DATA_ROWS. ``only_these``: every other setting that changes_results is
    unset, so the work computes as the session that recorded ``settings`` did."""
    from pyspark.sql import SparkSession

    session = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    keys = keys_set(session)
    if only_these:
        for key in keys:
            if changes_results(key) and key not in settings and session.conf.isModifiable(key):
                session.conf.unset(key)
    for key in SESSION_STAGING:
        # the user's write-audit-publish staging is theirs, not the work's: with
        # spark.wap.branch set, Iceberg refuses the work's own staged writes ("Cannot
        # set both WAP ID and branch") and writes a new table's rows to that branch
        # (CREATE's table then shows none); with spark.wap.id set, CREATE's rows were
        # staged and never published
        session.conf.unset(key)
    for key, value in {
        **SQL_TEXT_SETTINGS,
        **uncached_catalogs(session, keys),
        **settings,
    }.items():
        session.conf.set(key, value)
    if rows is not None and rows <= SMALL_DATA_ROWS:
        for key, value in small_data_settings(session).items():
            session.conf.set(key, value)
        session.conf.set("spark.sql.codegen.wholeStage", "false")
        session.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    return session


# the catalogs close_catalogs closes: those known to hold a resource of their own alone.
# A Hadoop catalog's close also shut Iceberg's in-process lock manager, which every
# Hadoop catalog of the JVM shares: the next commit of any table failed ("rejected from
# ScheduledThreadPoolExecutor [Terminated]")
CLOSED_CATALOGS = frozenset({"org.apache.iceberg.jdbc.JdbcCatalog"})


def close_catalogs(session: Any) -> None:
    """Close the JDBC catalogs a work session set up (CLOSED_CATALOGS). A clone sets its
    catalogs up anew (a JDBC catalog's connection pool) and nothing closes them: a
    scheduler on a JDBC catalog held one more pool after every refresh. Only the clone's
    own are closed: they are read from its catalog manager, which loads a catalog when
    first used. Best effort: a catalog that fails to close fails nothing else."""
    from dyntables.engine.jvm import java_class

    try:
        manager = session._jsparkSession.sessionState().catalogManager()
        field = manager.getClass().getDeclaredField("catalogs")
        field.setAccessible(True)
        loaded = field.get(manager)  # a Scala mutable map: name -> CatalogPlugin
        names = str(loaded.keys().mkString("\u0001")).split("\u0001")
        has_iceberg = java_class(session, "org.apache.iceberg.spark.source.HasIcebergCatalog")
        closeable = java_class(session, "java.io.Closeable")
    except Exception:  # another Spark than the one this was written for: leave them be
        return
    for name in filter(None, names):
        try:
            plugin = loaded.apply(name)
            if has_iceberg._java_lang_class.isInstance(plugin):
                catalog = plugin.icebergCatalog()
                kind = str(catalog.getClass().getName())
                if kind in CLOSED_CATALOGS and closeable._java_lang_class.isInstance(catalog):
                    catalog.close()
        except Exception:
            continue


@contextmanager
def catalogs_closed(session: Any) -> Iterator[Any]:
    """``session`` for the work, its catalogs closed after it (see close_catalogs)."""
    try:
        yield session
    finally:
        close_catalogs(session)


def label_jobs(sc: Any, group: str, description: str, pool: str) -> None:
    """Label the calling thread's next jobs as one unit in scheduler pool ``pool`` (see
    thread_properties_kept)."""
    sc.setJobGroup(group, description, interruptOnCancel=True)
    sc.setLocalProperty("spark.scheduler.pool", pool)


@contextmanager
def thread_properties_kept(sc: Any) -> Iterator[None]:
    """The thread's job group and pool as they were before the work, afterwards: else
    the caller's next queries ran as part of it (labelled with it, in its pool,
    cancelled with it)."""
    before = {key: sc.getLocalProperty(key) for key in _THREAD_PROPERTIES}
    try:
        yield
    finally:
        for key, value in before.items():
            sc.setLocalProperty(key, value)
