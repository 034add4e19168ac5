"""Where a catalog's leases and history journal live (pure: no Spark)."""

from __future__ import annotations

import pytest

from dyntables.catalog.registry import choose_system_root


def _no_folder() -> str | None:
    raise AssertionError("not asked for when a folder is already known")


def test_the_folder_the_user_set_comes_first() -> None:
    assert choose_system_root("s3://b/dt/", "s3://b/wh", _no_folder) == "s3://b/dt"


@pytest.mark.parametrize("warehouse", ["s3://b/wh", "/data/wh/", "file:/data/wh"])
def test_a_warehouse_that_is_a_path_holds_it(warehouse: str) -> None:
    assert choose_system_root(None, warehouse, _no_folder) == (
        warehouse.rstrip("/") + "/dyntables_sys"
    )


@pytest.mark.parametrize("warehouse", [None, "my_rest_warehouse"])
def test_else_the_history_tables_folder(warehouse: str | None) -> None:
    """A REST catalog's warehouse is a name: a relative folder of that name in each
    process's working directory left every process with leases of its own."""
    assert choose_system_root(None, warehouse, lambda: "s3://b/wh/dyntables_sys") == (
        "s3://b/wh/dyntables_sys"
    )


def test_no_folder_at_all_means_leases_in_this_process() -> None:
    def fails() -> str | None:
        raise RuntimeError("the catalog cannot create tables")

    assert choose_system_root(None, None, fails) is None
