"""Counting what a refresh's stages read from a status store (a fake one: the race that
makes Spark's store list a stage that ran as SKIPPED cannot be provoked on demand)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dyntables.engine.metrics import stages_input_rows


@dataclass
class _Option:
    value: object | None

    def isDefined(self) -> bool:  # noqa: N802 (Scala's name)
        return self.value is not None

    def get(self) -> object:
        return self.value


@dataclass
class _Input:
    rows: int

    def recordsRead(self) -> int:  # noqa: N802
        return self.rows


@dataclass
class _Metrics:
    rows: int

    def inputMetrics(self) -> _Input:  # noqa: N802
        return _Input(self.rows)


@dataclass
class _Task:
    rows: int | None

    def taskMetrics(self) -> _Option:  # noqa: N802
        return _Option(None if self.rows is None else _Metrics(self.rows))


@dataclass
class _Seq:
    items: list[_Task]

    def size(self) -> int:
        return len(self.items)

    def apply(self, i: int) -> _Task:
        return self.items[i]


@dataclass
class _Stage:
    state: str
    rows: int
    attempt: int = 0

    def status(self) -> str:
        return self.state

    def inputRecords(self) -> int:  # noqa: N802
        return self.rows

    def attemptId(self) -> int:  # noqa: N802
        return self.attempt


@dataclass
class _Store:
    stages: dict[int, _Stage]
    tasks: dict[int, list[_Task]] = field(default_factory=dict)

    def lastStageAttempt(self, stage: int) -> _Stage:  # noqa: N802
        if stage not in self.stages:
            raise RuntimeError(f"stage {stage} not found")
        return self.stages[stage]

    def taskCount(self, stage: int, attempt: int) -> int:  # noqa: N802
        return len(self.tasks.get(stage, []))

    def taskList(self, stage: int, attempt: int, limit: int) -> _Seq:  # noqa: N802
        return _Seq(self.tasks.get(stage, [])[:limit])


def test_stages_are_summed_once_each() -> None:
    store = _Store({1: _Stage("COMPLETE", 950), 2: _Stage("COMPLETE", 50)})
    assert stages_input_rows(store, {1, 2}) == 1000


def test_a_stage_listed_skipped_whose_tasks_ran_counts_what_they_read() -> None:
    # the shape seen in an aggregate refresh: the change-reading stage, shared by the
    # state write and the table write, listed SKIPPED with its one task stored
    store = _Store(
        {44: _Stage("SKIPPED", 0), 45: _Stage("COMPLETE", 50)},
        tasks={44: [_Task(950), _Task(None)]},
    )
    assert stages_input_rows(store, {44, 45}) == 1000


def test_a_stage_really_skipped_or_evicted_counts_nothing() -> None:
    store = _Store({7: _Stage("SKIPPED", 0), 8: _Stage("COMPLETE", 3)})
    assert stages_input_rows(store, {7, 8, 99}) == 3
