"""The rqlite tier: the tests that need a real ``rqlited``, run whole or reported not run.

A test is in the tier when it carries the ``rqlite`` mark (a module's
``pytestmark``, or the ``rqlite`` value of ``rqlite_cluster.STORE_KINDS``) or
uses the ``rqlite_cluster`` fixture. The binary is found once, at start-up, the way
``taskq dev cluster`` finds it (``TASKQ_RQLITED``, PATH, the cache
``scripts/install_rqlite.sh`` installs into); pytest itself never downloads
or builds one. Found, it is exported as ``TASKQ_RQLITED`` for the processes
the tests start and every test of the tier runs.

Not found, every other test still runs; a banner at the start says the tier
will not run and why, every test of the tier is skipped from one place with one reason (so
the summary folds them into one line), and the run passes unless
``TASKQ_REQUIRE_RQLITE=1`` (set by CI) makes it a failure.

A guard keeps the tier whole, with rqlited or without: a test outside the tier
that starts rqlited (itself, or through a process it runs) or reaches the
session's cluster fails, naming what it did. While such a test runs,
``TASKQ_RQLITED`` names a stand-in (``rqlited_outside_the_tier``) that only
records that it was started; and a test that got ``rqlite_cluster`` by any
route, ``getfixturevalue`` included, is checked at its end.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskq.dev.rqlited import RQLITED_ENV, RqlitedMissing, find_rqlited

REQUIRE_ENV = "TASKQ_REQUIRE_RQLITE"
GUARD_LOG_ENV = "TASKQ_TIER_GUARD_LOG"
"""Where the stand-in writes one line each time it is started."""
STAND_IN = Path(__file__).with_name("rqlited_outside_the_tier")

_MISSING = pytest.StashKey[str | None]()
# The tier's tests reported skipped in this run (a list: the hooks share one count).
_skipped_tier_tests = [0]


def _not_run_line(reason: str) -> str:
    return f"rqlite tier not run: {reason}"


def _required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def _in_tier(item: pytest.Item) -> bool:
    return item.get_closest_marker("rqlite") is not None


def _outside_line(item: pytest.Item, what: str) -> str:
    return (
        f"{item.nodeid} {what} but is not in the rqlite tier: mark it `rqlite` "
        "(pytestmark, or the rqlite value of STORE_KINDS)"
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        os.environ[RQLITED_ENV] = find_rqlited()
    except RqlitedMissing as exc:
        config.stash[_MISSING] = str(exc)
    else:
        config.stash[_MISSING] = None
    _skipped_tier_tests[0] = 0
    # One log per pytest process: xdist's workers each run their own items.
    handle, log = tempfile.mkstemp(prefix="taskq-tier-guard-", suffix=".log")
    os.close(handle)
    os.environ[GUARD_LOG_ENV] = log


def pytest_unconfigure(config: pytest.Config) -> None:
    log = os.environ.pop(GUARD_LOG_ENV, None)
    if log is not None:
        Path(log).unlink(missing_ok=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Outside the tier, rqlited is the stand-in for the whole of the test."""
    if _in_tier(item):
        return (yield)
    found = os.environ.get(RQLITED_ENV)
    os.environ[RQLITED_ENV] = str(STAND_IN)
    try:
        return (yield)
    finally:
        if found is None:
            os.environ.pop(RQLITED_ENV, None)
        else:
            os.environ[RQLITED_ENV] = found


def _take_stand_in_starts() -> list[str]:
    log = Path(os.environ[GUARD_LOG_ENV])
    starts = log.read_text().splitlines()
    if starts:
        log.write_text("")
    return starts


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[pytest.TestReport]:
    """A phase in which the stand-in was started fails, whatever it did besides."""
    report: pytest.TestReport = yield
    starts = _take_stand_in_starts()
    if starts and not _in_tier(item):
        report.outcome = "failed"
        report.longrepr = f"{_outside_line(item, 'started rqlited')}\n{report.longrepr or ''}"
    return report


@pytest.fixture(autouse=True)
def _rqlite_cluster_only_in_the_tier(request: pytest.FixtureRequest) -> Iterator[None]:
    """Reaching the session's cluster fails a test outside the tier, even when the
    cluster was already up (started by a test of the tier) and nothing was started."""
    yield
    if "rqlite_cluster" in request.fixturenames and not _in_tier(request.node):
        pytest.fail(_outside_line(request.node, "reached the rqlite_cluster"), pytrace=False)


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.stash[_MISSING] is None:
        return f"rqlite tier: {os.environ[RQLITED_ENV]}"
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """The banner, shown at any verbosity: the tier will not run, and why."""
    missing = session.config.stash[_MISSING]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing is None or reporter is None:
        return
    required = f" ({REQUIRE_ENV}=1: the run will fail)" if _required() else ""
    reporter.write_sep("!", f"{_not_run_line(missing)}{required}", yellow=True, bold=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        uses_cluster = "rqlite_cluster" in getattr(item, "fixturenames", ())
        if uses_cluster and item.get_closest_marker("rqlite") is None:
            item.add_marker(pytest.mark.rqlite)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test of the tier before its fixtures start anything, from this one place."""
    missing = item.config.stash[_MISSING]
    if missing is not None and item.get_closest_marker("rqlite") is not None:
        pytest.skip(_not_run_line(missing))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count the tier's skips where the reports meet: in the one process, or in
    the controller of pytest-xdist's workers (whose own counts it never sees)."""
    if report.skipped and "rqlite tier not run" in str(report.longrepr):
        _skipped_tier_tests[0] += 1


def _failed_by_requirement(config: pytest.Config) -> bool:
    return _skipped_tier_tests[0] > 0 and _required()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _failed_by_requirement(session.config) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    missing = config.stash[_MISSING]
    if missing is not None and _failed_by_requirement(config):
        terminalreporter.write_line(
            f"FAILED ({REQUIRE_ENV}=1) {_not_run_line(missing)}", red=True, bold=True
        )
