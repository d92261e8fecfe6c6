"""A list-valued ``taskq-worker`` flag given again adds to the list, as ``taskq submit --label``
does: ``--modules a.tasks --modules b.tasks`` runs both modules' jobs, not b's alone."""

from __future__ import annotations

import os

import pytest

from taskq.worker.main import build_parser, flag_values
from taskq.worker.settings import WorkerSettings, setting_flags, settings_from

LISTS = {"queues", "modules", "labels", "env_passthrough", "cpus"}


def settings_of(*argv: str, section: dict[str, object] | None = None) -> WorkerSettings:
    """The settings of ``taskq-worker ARGV``, its config file's [worker] being ``section``."""
    return settings_from(section or {}, flag_values(build_parser().parse_args(argv)))


def test_every_setting_that_takes_a_list_adds_up_its_flags() -> None:
    assert {each.setting for each in setting_flags() if each.listed} == LISTS


@pytest.mark.parametrize(
    ("argv", "setting", "expected"),
    [
        (("--modules", "a.tasks", "--modules", "b.tasks"), "modules", ("a.tasks", "b.tasks")),
        (("--queues", "lab", "--queues", "zz"), "queues", ("lab", "zz")),
        (("--labels", "gpu", "--labels", "ssd,gpu"), "labels", ("gpu", "ssd")),
        (
            ("--env-passthrough", "OMP_*", "--env-passthrough", "HF_HOME,OMP_*"),
            "env_passthrough",
            ("OMP_*", "HF_HOME"),
        ),
        # In the order given, each once; one flag with commas reads as before.
        (("--queues", "zz,lab", "--queues", "lab", "--queues", "a"), "queues", ("zz", "lab", "a")),
        (("--queues", "lab,zz"), "queues", ("lab", "zz")),
    ],
)
def test_a_list_flag_given_again_adds_to_the_list(
    argv: tuple[str, ...], setting: str, expected: tuple[str, ...]
) -> None:
    assert getattr(settings_of(*argv), setting) == expected


def test_cpus_given_again_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two CPUs to name on any machine: the check of what this process may use sees them.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    settings = settings_of("--cpus", "0", "--cpus", "1")
    assert settings.cpus == frozenset({0, 1})


def test_the_flags_list_replaces_the_config_files() -> None:
    section = {"queues": ["default", "images"], "labels": "gpu"}
    settings = settings_of("--queues", "lab", "--queues", "zz", section=section)
    assert settings.queues == ("lab", "zz")
    assert settings.labels == ("gpu",)


def test_the_help_says_a_list_flag_adds_up_and_replaces_the_config_files_list() -> None:
    words = " ".join(build_parser().format_help().split())
    for setting in setting_flags():
        if setting.listed:
            said = f"{' '.join(setting.flag.help.split())}; repeat it to add more"
            assert said in words, setting.option
    assert words.count("the flags' list replaces the config file's") == len(LISTS)
