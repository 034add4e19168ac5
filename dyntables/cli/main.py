"""``dyntables`` entry point: argument parsing, dispatch and the exit-code contract.

Exit codes: 0 success, 1 any error (one ``error [CODE]: ...`` line on stderr), 2 usage
errors (argparse), 130 interrupted. Spark starts only for commands that need it, so
``version`` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dyntables.cli.config import Settings, resolve_settings
from dyntables.cli.render import MAX_CELL_WIDTH
from dyntables.cli.report import report_error
from dyntables.cli.run import run_sql
from dyntables.cli.shell import run_shell
from dyntables.cli.version import version_lines
from dyntables.errors import DynTablesError
from dyntables.sql import split_statements

if TYPE_CHECKING:
    from dyntables.lakehouse import Lakehouse

LakehouseFactory = Callable[[Settings], "Lakehouse"]
DEFAULT_MAX_ROWS = 1000
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EPILOG = """\
examples:
  dyntables sql -e "SELECT * FROM orders"
  dyntables sql -f pipeline.sql
  dyntables --warehouse ./wh shell
  dyntables --conf spark.master=spark://host:7077 sql -e "SHOW TABLES"
  dyntables scheduler --workers 4          # refresh due dynamic tables until Ctrl-C

settings come from --flags, then $DYNTABLES_WAREHOUSE, then the nearest dyntables.toml
([dyntables] warehouse/catalog/namespace, [spark] settings) up from the current folder.
"""


def main(
    argv: Sequence[str] | None = None, *, lakehouse_factory: LakehouseFactory | None = None
) -> int:
    """Run one command; ``lakehouse_factory`` lets tests hand in an already running session."""
    try:
        return _main(argv, lakehouse_factory or open_lakehouse)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def open_lakehouse(settings: Settings) -> Lakehouse:
    from dyntables.lakehouse import Lakehouse

    return Lakehouse(
        warehouse=settings.warehouse,
        catalog=settings.catalog,
        namespace=settings.namespace,
        conf=settings.spark_conf,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dyntables",
        description="Dynamic Tables for Apache Spark on Iceberg.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_global_options(parser, after_command=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sql = _add_command(commands, "sql", "run SQL text or a script file and print the last result")
    source = sql.add_mutually_exclusive_group(required=True)
    source.add_argument("-e", "--execute", metavar="SQL", help="statements separated by ';'")
    source.add_argument(
        "-f", "--file", metavar="PATH", type=_read_script, help="a .sql script ('-' reads stdin)"
    )
    sql.set_defaults(handler=_cmd_sql)

    shell = _add_command(commands, "shell", "interactive SQL shell (reads stdin when piped)")
    shell.set_defaults(handler=_cmd_shell)

    version = _add_command(commands, "version", "print dyntables, pyspark and Iceberg versions")
    version.set_defaults(handler=_cmd_version)

    scheduler = _add_command(
        commands, "scheduler", "refresh dynamic tables on their intervals (foreground service)"
    )
    scheduler.add_argument(
        "--workers",
        type=_positive_int,
        default=4,
        metavar="N",
        help="refreshes at once (default: 4)",
    )
    scheduler.add_argument(
        "--tick",
        type=_positive_float,
        default=1.0,
        metavar="SECONDS",
        help="how often to re-read the catalog when idle (default: 1)",
    )
    scheduler.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="only tables in this namespace (repeatable; default: all)",
    )
    scheduler.add_argument(
        "--max-failures",
        type=_positive_int,
        default=5,
        metavar="N",
        help="suspend a table after N consecutive failures (default: 5)",
    )
    scheduler.add_argument(
        "--stop-timeout",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="on SIGINT/SIGTERM, wait this long for refreshes in flight (default: 60)",
    )
    scheduler.add_argument("--once", action="store_true", help="run the tables due now, then exit")
    scheduler.add_argument(
        "--verbose",
        action="store_true",
        help="log every NO_DATA refresh (default: a count once a minute)",
    )
    scheduler.set_defaults(handler=_cmd_scheduler)

    demo = _add_command(commands, "demo", "run the built-in demo pipeline")
    demo.add_argument("--duration", type=_positive_float, metavar="N", help="stop after N seconds")
    demo.add_argument("--no-live", dest="live", action="store_false", help="no live view")
    demo.add_argument(
        "--interval",
        type=_positive_float,
        default=1.0,
        metavar="SECONDS",
        help="refresh interval of the demo's tables, and seconds between order batches (default: 1)",
    )
    demo.set_defaults(handler=_cmd_demo)
    return parser


# -- commands -------------------------------------------------------------------------------


def _cmd_sql(args: argparse.Namespace, factory: LakehouseFactory) -> int:
    text: str = args.execute if args.execute is not None else args.file
    # Checked before Spark starts: an empty or unreadable script fails in milliseconds.
    if not split_statements(text):
        raise DynTablesError("nothing to run: the SQL text is empty")
    with _lakehouse(args, factory) as lh:
        output = run_sql(lh, text, args.max_rows, wide=args.wide)
    print(output, flush=True)
    return EXIT_OK


def _cmd_shell(args: argparse.Namespace, factory: LakehouseFactory) -> int:
    with _lakehouse(args, factory) as lh:
        return run_shell(
            lh,
            max_rows=args.max_rows,
            wide=args.wide,
            debug=args.debug,
            stdin=sys.stdin,
            stdout=sys.stdout,
            stderr=sys.stderr,
        )


def _cmd_version(args: argparse.Namespace, factory: LakehouseFactory) -> int:
    print("\n".join(version_lines()), flush=True)
    return EXIT_OK


def _cmd_scheduler(args: argparse.Namespace, factory: LakehouseFactory) -> int:
    from dyntables.scheduler import Policy, SchedulerConfig
    from dyntables.scheduler.service import serve

    config = SchedulerConfig(
        workers=args.workers,
        tick=args.tick,
        policy=Policy(max_failures=args.max_failures),
        namespaces=tuple(args.namespaces) if args.namespaces else None,
        stop_timeout=args.stop_timeout,
    )
    with _lakehouse(args, factory) as lh:
        return serve(lh, config, once=args.once, verbose=args.verbose)


def _cmd_demo(args: argparse.Namespace, factory: LakehouseFactory) -> int:
    from dyntables.demo import run_demo  # the demo pulls in more than the other commands

    with _lakehouse(args, factory) as lh:
        run_demo(lh, duration=args.duration, live=args.live, interval=args.interval)
    return EXIT_OK


# -- plumbing -------------------------------------------------------------------------------


def _main(argv: Sequence[str] | None, factory: LakehouseFactory) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (2) and --help (0) must not end the caller
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE if exc.code else EXIT_OK
    _merge_options_after_command(args)
    try:
        code: int = args.handler(args, factory)
        return code
    except BrokenPipeError:
        # `dyntables sql ... | head`: the reader left early; not an error worth a line.
        _silence_stdout()
        return EXIT_ERROR
    except Exception as exc:
        report_error(exc, sys.stderr, debug=args.debug)
        return EXIT_ERROR


@contextmanager
def _lakehouse(args: argparse.Namespace, factory: LakehouseFactory) -> Iterator[Lakehouse]:
    """Build the Lakehouse from the resolved settings and always close it (stops Spark)."""
    settings = resolve_settings(warehouse=args.warehouse, conf=args.conf, catalog=args.catalog)
    lh = factory(settings)
    try:
        yield lh
    finally:
        lh.close()


def _add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text, description=help_text)
    _add_global_options(parser, after_command=True)
    return parser


def _add_global_options(parser: argparse.ArgumentParser, *, after_command: bool) -> None:
    """The same options before or after the command.

    After the command they default to SUPPRESS so an absent flag does not overwrite the
    value given before it; --conf goes to its own list there, merged later, because
    argparse would otherwise replace the list given before the command.
    """
    default = argparse.SUPPRESS if after_command else None
    group = parser.add_argument_group("global options")
    group.add_argument(
        "--warehouse",
        metavar="PATH",
        default=default,
        help="warehouse folder (default: $DYNTABLES_WAREHOUSE, dyntables.toml, ./warehouse)",
    )
    group.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        dest="conf_after_command" if after_command else "conf",
        default=default if after_command else [],
        help="Spark/catalog setting, repeatable; wins over dyntables.toml [spark]",
    )
    group.add_argument("--catalog", metavar="NAME", default=default, help="Iceberg catalog name")
    group.add_argument(
        "--debug",
        action="store_true",
        default=default if after_command else False,
        help="print the full traceback on errors",
    )
    group.add_argument(
        "--max-rows",
        type=_non_negative_int,
        metavar="N",
        default=default if after_command else DEFAULT_MAX_ROWS,
        help=f"print at most N rows of a result (default: {DEFAULT_MAX_ROWS})",
    )
    group.add_argument(
        "--wide",
        action="store_true",
        default=default if after_command else False,
        help=f"print values whole (default: cut at {MAX_CELL_WIDTH} characters)",
    )


def _merge_options_after_command(args: argparse.Namespace) -> None:
    args.conf = [*args.conf, *getattr(args, "conf_after_command", [])]


def _read_script(path: str) -> str:
    """Read -f at parse time, so a missing file is a usage error before Spark starts."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise argparse.ArgumentTypeError(f"cannot read {path!r}: {reason}") from exc


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
