"""How the runner sets up a refresh's Spark session."""

from __future__ import annotations

import pytest

from dyntables import Lakehouse
from dyntables.refresh import runner
from tests.oracle import assert_oracle


def _refresh_plans(lh: Lakehouse, dt: str, mode: str = "INCREMENTAL") -> list[str]:
    """The physical plans Spark ran for a refresh of ``dt``, from the driver's SQL status
    store (each execution is described as ``refresh <table>``)."""
    outcome = lh.sql(f"REFRESH DYNAMIC TABLE {dt}").first()
    assert outcome.refresh_mode == mode
    store = lh.spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    plans = []
    for i in range(executions.size()):
        e = executions.apply(i)
        if e.description() == f"refresh {lh.qualify(dt).sql()}" and e.jobs().size() > 0:
            plans.append(str(e.physicalPlanDescription()))
    return plans


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

    monkeypatch.setattr(runner, "SMALL_DATA_ROWS", 5)
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
