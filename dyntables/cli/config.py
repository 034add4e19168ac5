"""Where the CLI's settings come from: flags, the environment and ``dyntables.toml``.

Precedence, strongest first:

- warehouse: ``--warehouse`` > ``$DYNTABLES_WAREHOUSE`` > toml ``[dyntables].warehouse``
  > ``./warehouse``;
- Spark settings: ``--conf k=v`` > toml ``[spark]`` (> the engine's embedded defaults);
- catalog: ``--catalog`` > toml; namespace: toml > ``public``.

The toml is found by walking up from the working directory, so a project keeps one file
at its root and every sub-folder sees it, the way ``pyproject.toml`` works.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dyntables.engine import DEFAULT_NAMESPACE
from dyntables.errors import ConfigError

CONFIG_FILE = "dyntables.toml"
WAREHOUSE_ENV = "DYNTABLES_WAREHOUSE"
DEFAULT_WAREHOUSE = "warehouse"
# Unknown keys are refused so a typo ("warehous") is an error, not a silent default.
DYNTABLES_KEYS = ("warehouse", "catalog", "namespace")


@dataclass(frozen=True)
class FileConfig:
    """What one ``dyntables.toml`` says, with its warehouse already made absolute."""

    path: Path | None = None
    warehouse: Path | None = None
    catalog: str | None = None
    namespace: str | None = None
    spark: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """Everything needed to build the Lakehouse, after precedence has been applied."""

    warehouse: Path
    catalog: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    spark_conf: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None


def find_config_file(start: Path) -> Path | None:
    """The nearest ``dyntables.toml`` in ``start`` or a parent, up to the filesystem root."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def load_config_file(path: Path) -> FileConfig:
    """Parse and validate one toml file; every problem is a ConfigError naming the file."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc

    section = _table(data, "dyntables", path)
    unknown = sorted(set(section) - set(DYNTABLES_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(unknown)} in [dyntables]; "
            f"allowed: {', '.join(DYNTABLES_KEYS)}"
        )
    warehouse = _string(section, "warehouse", path)
    return FileConfig(
        path=path,
        # Relative to the toml's folder, so the project works from any sub-folder.
        warehouse=path.parent / Path(warehouse).expanduser() if warehouse else None,
        catalog=_string(section, "catalog", path),
        namespace=_string(section, "namespace", path),
        spark=_flatten(_table(data, "spark", path), "", path),
    )


def parse_conf_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` from repeated ``--conf`` flags; the value may itself contain ``=``."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--conf {pair!r} is not key=value; write it like --conf spark.master=local[2]"
            )
        conf[key.strip()] = value
    return conf


def resolve_settings(
    *,
    warehouse: str | None = None,
    conf: Sequence[str] = (),
    catalog: str | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Apply the precedence rules; ``cwd``/``environ`` are parameters so tests stay pure."""
    cwd = Path.cwd() if cwd is None else cwd
    environ = os.environ if environ is None else environ
    flag_conf = parse_conf_pairs(conf)  # bad flags fail before the file is even read
    config_path = find_config_file(cwd)
    file_config = load_config_file(config_path) if config_path else FileConfig()

    if warehouse is not None and not warehouse.strip():
        raise ConfigError("--warehouse needs a folder path")
    env_warehouse = environ.get(WAREHOUSE_ENV) or None
    if warehouse or env_warehouse:
        chosen = cwd / Path(warehouse or env_warehouse or "").expanduser()
    elif file_config.warehouse is not None:
        chosen = file_config.warehouse
    else:
        chosen = cwd / DEFAULT_WAREHOUSE

    return Settings(
        warehouse=chosen,
        catalog=catalog or file_config.catalog,
        namespace=file_config.namespace or DEFAULT_NAMESPACE,
        spark_conf={**file_config.spark, **flag_conf},
        config_file=config_path,
    )


def _table(data: Mapping[str, Any], name: str, path: Path) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [{name}] must be a table, e.g. [{name}] on its own line")
    return value


def _string(section: Mapping[str, Any], key: str, path: Path) -> str | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: [dyntables].{key} must be a non-empty string")
    return value


def _flatten(table: Mapping[str, Any], prefix: str, path: Path) -> dict[str, str]:
    """Spark settings as strings; unquoted dotted keys (spark.master = ...) nest in TOML."""
    flat: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}.", path))
        elif isinstance(value, bool):  # before int: bool is an int subclass
            flat[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            flat[name] = str(value)
        else:
            raise ConfigError(
                f"{path}: [spark] {name!r} must be a string, number or boolean, "
                f"not {type(value).__name__}"
            )
    return flat
