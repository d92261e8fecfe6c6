"""A bad config file or store URL: the same exit status, 2, and one line from every command.

``taskq``, ``taskq-worker`` and ``taskq-tui`` read the same file and URLs, so
a script (or a service manager) can tell a setup to fix from a store to wait
for by the status alone, whichever of them met it. Each runs as a real process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import cli_runs
from tests.support.cli_runs import one_error_line

# What each command needs besides the fault to get as far as reading its setup.
_ARGS = {"taskq": ["jobs"], "taskq-worker": ["--modules", "tests.support.jobs"], "taskq-tui": []}
PROGRAMS = list(_ARGS)

CONFIG_FAULTS = {
    "not TOML": ("[store\nurl = 1\n", "is not valid TOML"),
    "an unknown key": ('[store]\nurl = "sqlite:///tmp/x.db"\nurll = 1\n', "unknown key(s) urll"),
    "a bad value": ("[store]\nurl = 5\n", "url must be a string, got 5"),
    "a bad store URL": ('[store]\nurl = "rqlite://h:1?timout=3"\n', "timout"),
}


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("fault", list(CONFIG_FAULTS))
def test_a_bad_config_file_exits_2_with_one_line(program: str, fault: str, tmp_path: Path) -> None:
    text, named = CONFIG_FAULTS[fault]
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    ran = cli_runs.command(program, "--config", str(config), *_ARGS[program])
    one_error_line(ran, 2, named, program=program)


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_bad_store_url_exits_2_with_one_line_and_creates_nothing(
    program: str, tmp_path: Path
) -> None:
    one_error_line(
        cli_runs.command(program, *_ARGS[program], store="postgres://x"),
        2,
        "unknown scheme 'postgres'",
        program=program,
    )
    missing = tmp_path / "no" / "dir" / "taskq.db"
    one_error_line(
        cli_runs.command(program, *_ARGS[program], store=f"sqlite://{missing}"),
        2,
        "does not exist",
        program=program,
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("program", ["taskq", "taskq-tui"])
def test_a_store_file_not_there_is_refused_not_made_by_a_reader(
    program: str, tmp_path: Path
) -> None:
    """A misspelt path would otherwise show a new, empty store as if it were the one meant."""
    missing = tmp_path / "taskq-typo.db"
    one_error_line(
        cli_runs.command(program, *_ARGS[program], store=f"sqlite://{missing}"),
        1,
        "holds no taskq data yet",
        program=program,
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_flag_it_does_not_know_is_one_line_naming_its_help(program: str) -> None:
    """As a bad setting is: not argparse's whole usage above it (a screen, for the worker)."""
    ran = cli_runs.command(program, *_ARGS[program], "--no-such-flag")
    one_error_line(ran, 2, "--no-such-flag", "--help'", program=program)
