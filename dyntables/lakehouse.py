"""The facade: ``Lakehouse(warehouse=...).sql(text)``.

It owns a Spark session (or borrows the user's), resolves names in the current
namespace, and routes each statement: ours to the dynamic-table commands, everything
else to Spark SQL unchanged, after the guards that keep dynamic tables read-only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dyntables.engine import DEFAULT_CATALOG, DEFAULT_NAMESPACE, build_session
from dyntables.engine.errors import translate
from dyntables.engine.session import exclude_optimizer_rules
from dyntables.errors import ConfigError, DynTablesError
from dyntables.sql import TableName, parse_statement, split_statements
from dyntables.sql.statements import SparkStatement, Statement
from dyntables.sql.tokens import namespace_shown, parse_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dyntables.commands import Commands
    from dyntables.scheduler import Scheduler
    from dyntables.scheduler.events import Listener


class Lakehouse:
    """Entry point. ``with Lakehouse(warehouse="./warehouse") as lh: lh.sql("...")``.

    - ``Lakehouse(warehouse=PATH)`` starts an embedded Spark (``local[*]``) with an Iceberg
      catalog in that folder.
    - ``Lakehouse(spark=session, catalog=NAME)`` uses a session the user built (a cluster);
      the catalog must be an Iceberg catalog configured on that session.
    """

    def __init__(
        self,
        warehouse: str | os.PathLike[str] | None = None,
        *,
        spark: SparkSession | None = None,
        catalog: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        conf: dict[str, str] | None = None,
    ) -> None:
        self.catalog = catalog or DEFAULT_CATALOG
        self.namespace = namespace
        self._owns_spark = spark is None
        if spark is None:
            path = warehouse or os.environ.get("DYNTABLES_WAREHOUSE") or "warehouse"
            self.warehouse: Path | None = Path(path).expanduser().resolve()
            spark = build_session(self.warehouse, self.catalog, conf)
        else:
            self.warehouse = None
        self.spark: SparkSession = spark
        _check_catalog(spark, self.catalog)
        exclude_optimizer_rules(spark)
        here = TableName((self.catalog, self.namespace)).sql()
        self._run_spark(f"CREATE NAMESPACE IF NOT EXISTS {here}")
        self._run_spark(f"USE {here}")
        self._commands: Commands | None = None
        self._scheduler: Scheduler | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> Lakehouse:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.stop_scheduler()
        if self._commands is not None:
            self._commands.close()
            self._commands = None
        if self._owns_spark:
            self.spark.stop()

    # -- SQL -------------------------------------------------------------------------------
    def sql(self, text: str) -> DataFrame:
        """Run one statement or a ``;``-separated script; return the last statement's result."""
        statements = split_statements(text)
        if not statements:
            raise DynTablesError("nothing to run: the SQL text is empty")
        result = None
        for statement_text in statements:
            result = self.execute(parse_statement(statement_text))
        assert result is not None
        return result

    def execute(self, statement: Statement) -> DataFrame:
        if isinstance(statement, SparkStatement):
            if statement.writes is not None and statement.verb is not None:
                for target in (statement.writes, *statement.also_writes):
                    self.commands.guard_write(statement.verb, target)
            if "refresh_history" in statement.text.lower():  # a direct read sees every row
                self.commands.registry.history.flush()
            result = self._run_spark(statement.text)
            if statement.verb == "USE":  # unqualified names now resolve where Spark's do
                self.catalog = str(self.spark.catalog.currentCatalog())
                self.namespace = namespace_shown(str(self.spark.catalog.currentDatabase()))
            return result
        try:
            return self.commands.execute(statement)
        except DynTablesError:
            raise
        except Exception as exc:
            raise translate(exc, statement.text) from exc

    def table(self, name: str) -> DataFrame:
        return self._run_spark(f"SELECT * FROM {name}")

    @property
    def commands(self) -> Commands:
        if self._commands is None:
            from dyntables.commands import Commands

            self._commands = Commands(self)
        return self._commands

    # -- scheduling ------------------------------------------------------------------------
    def start_scheduler(
        self,
        workers: int = 4,
        tick: float = 1.0,
        *,
        namespaces: list[str] | None = None,
        tables: list[str] | None = None,
        max_failures: int = 5,
        listeners: list[Listener] | None = None,
    ) -> Scheduler:
        """Refresh due dynamic tables on a background thread (what ``dyntables scheduler``
        does in the foreground). Scope: ``tables`` (names as written) or ``namespaces``
        (default: all). Log lines go to ``logging`` unless ``listeners`` are given."""
        from dyntables.scheduler import Policy, Scheduler, SchedulerConfig
        from dyntables.scheduler.events import logging_listener

        if self._scheduler is not None and self._scheduler.running:
            raise DynTablesError(
                "a scheduler is already running in this Lakehouse; stop it with stop_scheduler()"
            )
        config = SchedulerConfig(
            workers=workers,
            tick=tick,
            policy=Policy(max_failures=max_failures),
            namespaces=tuple(namespaces) if namespaces is not None else None,
            tables=tuple(str(self.qualify(t)) for t in tables) if tables is not None else None,
        )
        self._scheduler = Scheduler(
            self.commands.registry,
            config,
            listeners=listeners if listeners is not None else [logging_listener()],
        )
        return self._scheduler.start()

    def stop_scheduler(self, timeout: float | None = None) -> bool:
        """Stop the background scheduler after its refreshes in flight (up to ``timeout``
        seconds, default 60); True when none was left running."""
        scheduler, self._scheduler = self._scheduler, None
        return scheduler.stop(timeout) if scheduler is not None else True

    # -- names -----------------------------------------------------------------------------
    def qualify(self, name: TableName | str) -> TableName:
        """catalog.namespace.table for a name as written (1, 2 or 3 parts)."""
        parts = name.parts if isinstance(name, TableName) else parse_name(name).parts
        if len(parts) == 1:
            return TableName((self.catalog, self.namespace, parts[0]))
        if len(parts) == 2:
            return TableName((self.catalog, *parts))
        return TableName(tuple(parts))

    def _run_spark(self, text: str) -> DataFrame:
        try:
            return self.spark.sql(text)
        except Exception as exc:  # Spark raises a zoo of types; translate them all
            raise translate(exc, text) from exc


def _check_catalog(spark: SparkSession, catalog: str) -> None:
    """A name no catalog is configured under: Spark read `nosuch`.`public` as a database
    name and said "_LEGACY_ERROR_TEMP_1055: The database name is not valid"."""
    if catalog.lower() == "spark_catalog" or spark.conf.get(f"spark.sql.catalog.{catalog}", None):
        return
    raise ConfigError(
        f"catalog {catalog} is not configured on this Spark session; set "
        f"spark.sql.catalog.{catalog}=org.apache.iceberg.spark.SparkCatalog and its type "
        "(or catalog-impl), uri and warehouse, or name a catalog the session has"
    )
