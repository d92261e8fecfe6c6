"""A store URL that cannot be read is refused with the URLs the program takes, and no other:
``taskq``, ``taskq-tui`` and ``taskq.Client`` take a taskq serve's, a command that needs
the store itself and the worker do not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import taskq as taskq_package
from taskq import errors
from tests.support.cli_runs import command, one_error_line, taskq

MISTYPED = "sqlit:///tmp/taskq.db"
STORES_ONLY = "unknown scheme 'sqlit'; expected sqlite, rqlite or rqlites"
SERVED_TOO = (
    "unknown scheme 'sqlit'; expected sqlite, rqlite, rqlites, or http(s) for a taskq serve"
)


def test_taskq_lists_a_taskq_serve_among_the_urls_it_takes() -> None:
    one_error_line(taskq("jobs", store=MISTYPED), 2, SERVED_TOO)


def test_the_console_lists_a_taskq_serve_among_the_urls_it_takes() -> None:
    one_error_line(command("taskq-tui", store=MISTYPED), 2, SERVED_TOO, program="taskq-tui")


def test_a_python_client_lists_a_taskq_serve_among_the_urls_it_takes() -> None:
    with pytest.raises(errors.ConfigError, match=re.escape(SERVED_TOO)):
        taskq_package.Client(MISTYPED)


def test_a_command_that_needs_the_store_lists_store_urls_only(tmp_path: Path) -> None:
    for args in (["serve"], ["backup", str(tmp_path / "copy.db")]):
        said = one_error_line(taskq(*args, store=MISTYPED), 2, STORES_ONLY)
        assert "http" not in said
    assert not (tmp_path / "copy.db").exists()


def test_the_worker_lists_store_urls_only() -> None:
    ran = command("taskq-worker", "--modules", "tests.support.jobs", store=MISTYPED)
    said = one_error_line(ran, 2, STORES_ONLY, program="taskq-worker")
    assert "http" not in said
