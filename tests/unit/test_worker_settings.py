"""The worker's settings: the [worker] section, then flags, each fault told in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq import errors
from taskq.worker.main import build_parser
from taskq.worker.settings import ISOLATION_MODES, WorkerSettings, settings_from

TIMINGS = {"lease_seconds": 2, "heartbeat_seconds": 0.5, "lease_margin_seconds": 0.5}


def complaint(section: dict[str, object]) -> str:
    with pytest.raises(errors.ConfigError) as caught:
        settings_from(section)
    return str(caught.value)


def test_flags_override_the_section_and_unset_flags_leave_it() -> None:
    settings = settings_from(
        {"queues": ["a"], "concurrency": 2, "labels": ["gpu"]},
        {"queues": "b, c", "concurrency": None, "modules": "pkg.tasks,other"},
    )
    assert settings.queues == ("b", "c")
    assert settings.concurrency == 2
    assert settings.labels == ("gpu",)
    assert settings.modules == ("pkg.tasks", "other")


def test_whole_numbers_become_seconds() -> None:
    settings = settings_from(TIMINGS)
    assert (settings.lease_seconds, settings.heartbeat_seconds) == (2.0, 0.5)


def test_every_unknown_key_is_named_with_the_known_ones() -> None:
    line = complaint({"concurency": 3, "queus": ["a"]})
    assert line.startswith("worker: unknown key(s) concurency, queus in [worker]; known: ")
    assert "concurrency" in line.split("known: ")[1]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number >= 1, got 0"),
        ({"pool_recycle_after": "many"}, "pool_recycle_after must be a whole number >= 1"),
        ({"queues": []}, "queues must be a non-empty list"),
        ({"queues": ["a", ""]}, "queues must be a non-empty list, each a non-empty string"),
        ({"labels": [3]}, "labels must be a list, each a non-empty string, got [3]"),
        ({"modules": ["os.path", "1x"]}, "modules must be a list, each a module name"),
        # A function, or a file, where a module goes: the module meant.
        (
            {"modules": "lab:slow"},
            "modules: 'lab:slow' names a function (slow in module lab); modules takes "
            "modules, whose declared jobs it runs: --modules lab",
        ),
        (
            {"modules": "jobs/thumbs.py"},
            "modules: 'jobs/thumbs.py' is a file; modules takes module names: --modules thumbs, "
            "with the folder that holds thumbs.py on the import path (PYTHONPATH)",
        ),
        ({"isolation": "thread"}, "isolation must be one of pool, process, got 'thread'"),
        ({"grace_seconds": 0}, "grace_seconds must be a positive, finite number of seconds"),
        ({"idle_poll_seconds": float("inf")}, "idle_poll_seconds must be a positive, finite"),
        ({"lease_seconds": True}, "lease_seconds must be a positive, finite number"),
        ({"allow_shell": "yes"}, "allow_shell must be true or false, got 'yes'"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"max_limits": 3}, "max_limits must be a table, got 3"),
        ({"max_limits": {"memroy_bytes": 1}}, "max_limits: unknown limit(s) memroy_bytes"),
    ],
)
def test_a_bad_value_names_its_key_and_what_it_must_be(
    section: dict[str, object], expected: str
) -> None:
    line = complaint(section)
    assert line.startswith("worker: ")
    assert expected in line


def test_a_lease_must_outlast_two_heartbeats_and_the_margin() -> None:
    line = complaint({**TIMINGS, "heartbeat_seconds": 1})
    assert "lease_seconds must be at least two heartbeat_seconds plus lease_margin_seconds" in line


def test_a_worker_without_modules_is_refused_unless_it_runs_code_or_shell() -> None:
    with pytest.raises(errors.ConfigError, match="no modules given"):
        settings_from({}).check_runs_something()
    settings_from({"allow_shell": True}).check_runs_something()
    settings_from({"modules": "pkg.tasks"}).check_runs_something()


@pytest.mark.parametrize("modules", ["os", "builtins", "pkg.tasks,posix", "os.path"])
def test_a_module_of_pythons_own_is_refused_as_a_workers(modules: str) -> None:
    # Given one, a worker would run os:system or builtins:exec for anyone who submits.
    with pytest.raises(errors.ConfigError, match="is Python's own") as refused:
        settings_from({"modules": modules}).check_runs_something()
    assert "pkg.tasks" not in str(refused.value)


def test_the_isolation_modes_are_the_declared_ones() -> None:
    assert ISOLATION_MODES == ("pool", "process")


def test_a_file_here_is_told_with_its_folder_for_the_import_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "thumbs.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert complaint({"modules": "jobs/thumbs.py"}) == (
        "worker: modules: 'jobs/thumbs.py' is a file; modules takes module names: "
        "--modules thumbs, with jobs on the import path (PYTHONPATH=jobs)"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "jobs"))
    assert complaint({"modules": "jobs/thumbs.py"}) == (
        "worker: modules: 'jobs/thumbs.py' is a file; modules takes module names: --modules thumbs"
    )


def test_the_workers_help_says_what_ctrl_c_does_and_how_to_stop_at_once() -> None:
    words = " ".join(build_parser().format_help().split())
    # The grace period is a config setting, not a flag: the help names the key the config takes.
    assert "grace_seconds" in words
    assert "grace_seconds" in WorkerSettings.__struct_fields__
    assert "A second Ctrl-C or SIGTERM hands them back at once." in words
