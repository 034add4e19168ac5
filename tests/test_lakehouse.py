"""The facade against real Spark + Iceberg: a round trip through lh.sql."""

from __future__ import annotations

import pytest

from dyntables import Lakehouse
from dyntables.errors import AnalysisError, ConfigError, SqlSyntaxError, TableNotFoundError
from tests.conftest import rows


def test_round_trip_with_time_travel(lh: Lakehouse, unique) -> None:
    t = unique("orders")
    lh.sql(f"CREATE TABLE {t} (id BIGINT, item STRING, qty INT)")
    lh.sql(f"INSERT INTO {t} VALUES (1, 'shoe', 2), (2, 'mat', 1), (3, 'rope', 5)")
    first = lh.sql(f"SELECT snapshot_id FROM public.{t}.snapshots ORDER BY committed_at").collect()[
        -1
    ][0]
    lh.sql(f"UPDATE {t} SET qty = 3 WHERE id = 2")
    lh.sql(f"DELETE FROM {t} WHERE id = 3")
    assert rows(lh.sql(f"SELECT * FROM {t}")) == [(1, "shoe", 2), (2, "mat", 3)]
    assert rows(lh.sql(f"SELECT * FROM {t} VERSION AS OF {first}")) == [
        (1, "shoe", 2),
        (2, "mat", 1),
        (3, "rope", 5),
    ]


def test_tables_are_iceberg_copy_on_write_in_public(lh: Lakehouse, unique) -> None:
    t = unique("plain")
    lh.sql(f"CREATE TABLE {t} (a INT)")
    props = dict(lh.sql(f"SHOW TBLPROPERTIES {t}").collect())
    assert props["write.delete.mode"] == "copy-on-write"
    assert props["write.update.mode"] == "copy-on-write"
    assert props["write.merge.mode"] == "copy-on-write"
    assert lh.sql(f"SHOW TABLES IN {lh.catalog}.public LIKE '{t}'").count() == 1
    provider = [r for r in lh.sql(f"DESCRIBE TABLE EXTENDED {t}").collect() if r[0] == "Provider"]
    assert provider[0][1] == "iceberg"


def test_script_returns_the_last_statement(lh: Lakehouse, unique) -> None:
    t = unique("script")
    df = lh.sql(
        f"""
        CREATE TABLE {t} (a INT, s STRING);  -- a comment; with a semicolon
        INSERT INTO {t} VALUES (1, 'x;y'), (2, 'it''s');
        SELECT a, s FROM {t} WHERE s LIKE '%;%'
        """
    )
    assert rows(df) == [(1, "x;y")]


def test_unknown_table_is_a_one_line_error(lh: Lakehouse) -> None:
    with pytest.raises(TableNotFoundError) as err:
        lh.sql("SELECT * FROM no_such_table_anywhere")
    line = err.value.one_line()
    assert "\n" not in line
    assert "no_such_table_anywhere" in line and "SHOW TABLES" in line


def test_syntax_error_is_a_one_line_error(lh: Lakehouse) -> None:
    with pytest.raises(SqlSyntaxError) as err:
        lh.sql("SELEC 1")
    assert "\n" not in err.value.one_line()
    assert err.value.code == "SQL_SYNTAX"


def test_a_syntax_error_in_a_dynamic_tables_query_names_the_table(lh: Lakehouse) -> None:
    with pytest.raises(SqlSyntaxError) as err:
        lh.sql("CREATE DYNAMIC TABLE misspelt AS SELECT a, FROM (SELECT 1 AS a")
    assert f"dynamic table {lh.qualify('misspelt')}: cannot parse the query" in err.value.message
    assert "count from the text after AS" in err.value.message


def test_bad_column_is_an_analysis_error(lh: Lakehouse, unique) -> None:
    t = unique("cols")
    lh.sql(f"CREATE TABLE {t} (a INT)")
    with pytest.raises(AnalysisError) as err:
        lh.sql(f"SELECT nope FROM {t}")
    assert "nope" in err.value.one_line()


def test_a_shared_folder_the_user_names_holds_the_leases(lh: Lakehouse, tmp_path, unique) -> None:
    """``spark.dyntables.system-root``: where the warehouse is no folder (a REST
    catalog's is a name), the leases that keep two processes from refreshing one table
    at once need one that every process sees."""
    spark = lh.spark
    root = tmp_path / "shared"
    spark.conf.set("spark.sql.catalog.rooted", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.rooted.type", "hadoop")
    spark.conf.set("spark.sql.catalog.rooted.warehouse", str(tmp_path / "rooted"))
    spark.conf.set("spark.dyntables.system-root", f"file:{root}")
    try:
        rooted = Lakehouse(spark=spark, catalog="rooted")
        assert rooted.commands.registry.system_root == f"file:{root}"
        src, dt = unique("src"), unique("dt")
        rooted.sql(f"CREATE TABLE {src} (a INT); INSERT INTO {src} VALUES (1)")
        rooted.sql(f"CREATE DYNAMIC TABLE {dt} AS SELECT a FROM {src}")
        rooted.sql(f"INSERT INTO {src} VALUES (2); REFRESH DYNAMIC TABLE {dt}")
        assert (root / "_locks").is_dir() and (root / "_history_journal").exists()
        rooted.close()
    finally:
        spark.conf.unset("spark.dyntables.system-root")
        lh.sql(f"USE {lh.catalog}.{lh.namespace}")


def test_qualify_resolves_in_the_current_namespace(lh: Lakehouse) -> None:
    assert str(lh.qualify("t")) == f"{lh.catalog}.public.t"
    assert str(lh.qualify("other.t")) == f"{lh.catalog}.other.t"
    assert str(lh.qualify("c.n.t")) == "c.n.t"


@pytest.mark.parametrize("cached", [False, True], ids=["cache-off", "cache-on"])
def test_a_session_the_user_built_and_another_catalog(
    lh: Lakehouse, tmp_path, unique, cached: bool
) -> None:
    """Lakehouse(spark=..., catalog=...): what a cluster user does with their own session.
    With Iceberg's default table cache on, a refresh did not find the write it had just
    staged, said INCREMENTAL and published its state without its rows: they were lost
    for good (found by a helper following the README)."""
    spark = lh.spark
    catalog = "cached" if cached else "other"
    writer = spark.newSession()  # another writer, with a cache of its own
    for session in (spark, writer):
        session.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
        session.conf.set(f"spark.sql.catalog.{catalog}.type", "hadoop")
        session.conf.set(f"spark.sql.catalog.{catalog}.warehouse", str(tmp_path / catalog))
        if not cached:
            session.conf.set(f"spark.sql.catalog.{catalog}.cache-enabled", "false")
    borrowed = Lakehouse(spark=spark, catalog=catalog)
    try:
        src, dt = unique("src"), unique("dt")
        borrowed.sql(f"CREATE TABLE {src} (a INT); INSERT INTO {src} VALUES (1), (2)")
        borrowed.sql(f"CREATE DYNAMIC TABLE {dt} AS SELECT count(*) AS n FROM {src}")
        borrowed.sql(f"INSERT INTO {src} VALUES (3)")
        assert borrowed.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert rows(spark.sql(f"SELECT * FROM {catalog}.public.{dt}")) == [(3,)]
        writer.sql(f"INSERT INTO {catalog}.public.{src} VALUES (4)")
        assert borrowed.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert rows(borrowed.sql(f"SELECT * FROM {dt}")) == [(4,)]
        history = borrowed.sql(
            f"SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = '{dt}' LIMIT 1"
        ).first()
        assert history.workspace_name == catalog
    finally:
        borrowed.close()  # borrowed session: close() must not stop it
        lh.sql(f"USE {lh.catalog}.{lh.namespace}")
    assert spark.sql("SELECT 1").first()[0] == 1


def test_a_catalog_the_session_does_not_have_is_named(lh: Lakehouse) -> None:
    """Spark said "_LEGACY_ERROR_TEMP_1055: The database name is not valid"."""
    with pytest.raises(ConfigError, match="catalog nosuch is not configured"):
        Lakehouse(spark=lh.spark, catalog="nosuch")
    assert lh.spark.catalog.currentCatalog() == lh.catalog
