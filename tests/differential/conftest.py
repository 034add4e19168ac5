"""Fixtures of the differential suite: one Harness on the session's Lakehouse, and a
summary of what the suite checked at the end of the run."""

from __future__ import annotations

import pytest

from tests.differential.harness import Harness, Stats

STATS = Stats()
# (seconds, scenario) of the quick profile's runs, for the summary: where its time goes
TIMES: list[tuple[float, str]] = []


@pytest.fixture(scope="session")
def harness(lh) -> Harness:  # type: ignore[no-untyped-def]
    return Harness(lh, STATS)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    if not STATS.scenarios:
        return
    s = STATS
    terminalreporter.write_line(
        f"differential: {s.scenarios} scenarios, {s.queries} queries, {s.refreshes} refreshes checked "
        f"(INCREMENTAL {s.modes['INCREMENTAL']}, FULL {s.modes['FULL']}, forced FULL {s.modes['forced']}, "
        f"NO_DATA {s.modes['NO_DATA']}, injected failures {s.modes['faults']}), {s.mismatches} mismatches, "
        f"{s.known_bugs} known bugs reproduced, {s.compactions} compactions of dynamic tables, "
        f"{s.seconds:.0f} s"
    )
    if TIMES:
        slowest = ", ".join(f"{name} {sec:.0f} s" for sec, name in sorted(TIMES)[::-1][:10])
        terminalreporter.write_line(f"differential: slowest scenarios: {slowest}")
    if config.getoption("verbose") > 0:
        terminalreporter.write_line(
            "differential time by step: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in s.timing.most_common())
        )
        terminalreporter.write_line(s.coverage_table())
