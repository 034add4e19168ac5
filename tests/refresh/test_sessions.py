"""The Spark sessions a refresh or a CREATE runs its work in."""

from __future__ import annotations

import pytest

from dyntables import Lakehouse
from dyntables.refresh import sessions
from tests.oracle import assert_oracle


def _plans(lh: Lakehouse, description: str) -> list[str]:
    """The physical plans of the Spark executions described as ``description`` (work
    labels its jobs so), from the driver's SQL status store, oldest first."""
    store = lh.spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    plans = []
    for i in range(executions.size()):
        e = executions.apply(i)
        if e.description() == description and e.jobs().size() > 0:
            plans.append(str(e.physicalPlanDescription()))
    return plans


def _refresh_plans(lh: Lakehouse, dt: str, mode: str = "INCREMENTAL") -> list[str]:
    """The physical plans Spark ran for refreshes of ``dt``, after refreshing it."""
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert outcome.refresh_mode == mode
    return _plans(lh, f"refresh {lh.qualify(dt).sql()}")


def _compiled(plan: str) -> bool:
    """Whether a formatted physical plan has stages of generated Java code."""
    return "[codegen id" in plan


def test_a_refresh_of_few_rows_runs_interpreted_and_a_larger_one_compiled(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"CREATE TABLE {src} (k STRING, v BIGINT); INSERT INTO {src} VALUES ('a', 1), ('b', 2);"
        f"CREATE DYNAMIC TABLE {dt} AS SELECT k, SUM(v) AS s, COUNT(*) AS n FROM {src} GROUP BY k"
    )
    lh.sql(f"INSERT INTO {src} VALUES ('a', 3), ('c', 4)")
    plans = _refresh_plans(lh, dt)
    # 4 source rows and 2 in the table: no Java generated for any job it ran
    assert plans and not any(map(_compiled, plans))
    assert_oracle(lh, dt)

    monkeypatch.setattr(sessions, "SMALL_DATA_ROWS", 5)
    lh.sql(f"UPDATE {src} SET v = 5 WHERE k = 'b'")
    plans_after = _refresh_plans(lh, dt)[len(plans) :]
    assert plans_after and any(map(_compiled, plans_after))  # more rows than that: compiled
    assert_oracle(lh, dt)
    # the user's session keeps its own settings
    assert lh.spark.conf.get("spark.sql.codegen.wholeStage") == "true"


def test_a_full_refresh_of_few_rows_is_planned_for_them(lh: Lakehouse, unique) -> None:  # type: ignore[no-untyped-def]
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"CREATE TABLE {src} (k STRING, v BIGINT); INSERT INTO {src} VALUES ('a', 1), ('b', 2);"
        f"CREATE DYNAMIC TABLE {dt} REFRESH_MODE = FULL AS SELECT k, SUM(v) AS s FROM {src} GROUP BY k"
    )
    lh.sql(f"INSERT INTO {src} VALUES ('a', 3)")
    plans = _refresh_plans(lh, dt, "FULL")
    assert plans and not any(map(_compiled, plans))
    assert not any("AdaptiveSparkPlan" in p for p in plans)  # the session's AQE is on
    assert lh.spark.conf.get("spark.sql.adaptive.enabled") == "true"
    assert_oracle(lh, dt)


def test_the_callers_job_group_and_pool_are_theirs_again_after_a_refresh(
    lh: Lakehouse, unique
) -> None:  # type: ignore[no-untyped-def]
    src, dt = unique("src"), unique("dt")
    lh.sql(
        f"CREATE TABLE {src} (k STRING); INSERT INTO {src} VALUES ('a');"
        f"CREATE DYNAMIC TABLE {dt} AS SELECT k FROM {src}"
    )
    sc = lh.spark.sparkContext
    sc.setJobGroup("mine", "my report")
    try:
        lh.sql(f"INSERT INTO {src} VALUES ('b')")
        assert lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first().refresh_mode == "INCREMENTAL"
        assert sc.getLocalProperty("spark.jobGroup.id") == "mine"
        assert sc.getLocalProperty("spark.job.description") == "my report"
        assert sc.getLocalProperty("spark.scheduler.pool") is None
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)


def test_a_create_over_few_rows_is_planned_for_them_and_a_larger_one_compiled(
    lh: Lakehouse, unique, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    src, small, large = unique("src"), unique("small"), unique("large")
    lh.sql(f"CREATE TABLE {src} (k STRING, v BIGINT); INSERT INTO {src} VALUES ('a', 1), ('b', 2)")
    sc = lh.spark.sparkContext
    sc.setJobGroup("mine", "my report")
    try:
        query = f"SELECT k, SUM(v) AS s, COUNT(*) AS n FROM {src} GROUP BY k"
        lh.sql(f"CREATE DYNAMIC TABLE {small} AS {query}")
        plans = _plans(lh, f"create {lh.qualify(small).sql()}")
        # the build (its state table and the table) ran as one unit, without generated
        # code or adaptive execution, and gave the thread its labels back
        assert len(plans) >= 2 and not any(map(_compiled, plans))
        assert not any("AdaptiveSparkPlan" in p for p in plans)
        assert sc.getLocalProperty("spark.jobGroup.id") == "mine"
        assert sc.getLocalProperty("spark.job.description") == "my report"
        assert lh.spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert lh.spark.conf.get("spark.sql.adaptive.enabled") == "true"
        assert_oracle(lh, small)

        monkeypatch.setattr(sessions, "SMALL_DATA_ROWS", 1)
        lh.sql(f"CREATE DYNAMIC TABLE {large} AS {query}")
        plans = _plans(lh, f"create {lh.qualify(large).sql()}")
        assert plans and all(map(_compiled, plans))  # more rows than that: compiled
        assert_oracle(lh, large)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)
