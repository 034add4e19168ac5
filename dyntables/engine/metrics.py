"""What Spark's stages read for one refresh, from the driver's status store (no job).

``rows_read.<source>`` says how much of each source's *change* a refresh captured; a
join also reads its other inputs (whole, unless Iceberg's file statistics let it skip
files), and only Spark's own input metrics show that. A refresh runs its jobs under its
job id as job group (threads it starts inherit it), so they are told apart from the
jobs of refreshes running beside it.
"""

from __future__ import annotations

from typing import Any

# the status store is fed by Spark's listener bus, asynchronously; a refresh waits at
# most this long for its last stages' metrics to arrive
LISTENER_WAIT_MS = 2_000


def input_rows(spark: Any, job_group: str) -> int | None:
    """Input records of every stage of the group's jobs (a stage skipped because its
    shuffle output was reused read nothing); None when Spark cannot say."""
    sc = spark.sparkContext
    try:
        jsc = sc._jsc.sc()
        try:
            jsc.listenerBus().waitUntilEmpty(LISTENER_WAIT_MS)
        except Exception:  # a busy bus: count what has arrived
            pass
        store = jsc.statusStore()
        tracker = sc.statusTracker()
        stages: set[int] = set()
        for job_id in tracker.getJobIdsForGroup(job_group):
            info = tracker.getJobInfo(job_id)
            stages.update(info.stageIds if info is not None else ())
        return stages_input_rows(store, stages)
    except Exception:  # metrics are a report, never a reason to fail a refresh
        return None


def stages_input_rows(store: Any, stages: set[int]) -> int:
    """Input records of these stages, from the status store. A set: a stage two jobs
    share (both writes of a refresh wait on one cached change) is listed by both and
    read its input once."""
    total = 0
    for stage in stages:
        try:
            data = store.lastStageAttempt(stage)
        except Exception:  # evicted from the store
            continue
        rows = int(data.inputRecords())
        if rows == 0 and str(data.status()) == "SKIPPED":
            rows = _tasks_input_rows(store, stage, int(data.attemptId()))
        total += rows
    return total


def _tasks_input_rows(store: Any, stage: int, attempt: int) -> int:
    """What a stage listed as SKIPPED read anyway. Two concurrent jobs share the stage that
    reads a refresh's change; when the first job ends while the listener still has that
    stage pending, the status store marks it SKIPPED and drops it from the live stages,
    so its tasks, which do run, are stored but never added to the stage's totals (seen in
    about one aggregate refresh in three: the change's 950 rows were missing from
    ``input_rows``). A stage really skipped has no tasks, so this costs one lookup."""
    count = int(store.taskCount(stage, attempt))
    if count == 0:
        return 0
    tasks = store.taskList(stage, attempt, count)
    rows = 0
    for i in range(tasks.size()):
        metrics = tasks.apply(i).taskMetrics()
        if metrics.isDefined():
            rows += int(metrics.get().inputMetrics().recordsRead())
    return rows


def jobs_started(spark: Any) -> int:
    """How many Spark jobs the application has started: the highest job id, not the
    number listed, since the status store keeps only the last ``spark.ui.retainedJobs``
    and drops older ones in batches."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return max((int(jobs.apply(i).jobId()) + 1 for i in range(jobs.size())), default=0)
