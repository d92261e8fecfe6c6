"""The ``taskq`` command's table of which module adds which command (``cli.main``)."""

from __future__ import annotations

import importlib

import pytest

from taskq.cli import command
from taskq.cli.main import COMMAND_MODULES, build_parser, command_named


def _added_by(module: str) -> list[str]:
    commands = command.Parser(prog="taskq").add_subparsers(dest="command")
    importlib.import_module(f"taskq.cli.{module}").add_commands(commands)
    return list(commands.choices)


@pytest.mark.parametrize("module", sorted(set(COMMAND_MODULES.values())))
def test_the_table_names_every_command_a_module_adds(module: str) -> None:
    named = [name for name, owner in COMMAND_MODULES.items() if owner == module]
    assert _added_by(module) == named


def test_the_whole_parser_has_every_command_of_the_table_in_its_order() -> None:
    parser = build_parser()
    subparsers = next(
        action for action in parser._actions if action.dest == "command" and action.choices
    )
    assert list(subparsers.choices or {}) == list(COMMAND_MODULES)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["jobs", "--json"], "jobs"),
        (["--store", "sqlite:///x.db", "status", "1"], "status"),
        (["--config", "queue", "pause", "q"], "pause"),
        (["--store=sqlite:///x.db", "jobs"], "jobs"),
        (["--json"], None),
        ([], None),
        (["--store"], None),
    ],
)
def test_the_command_is_the_first_word_that_is_no_option_or_its_value(
    argv: list[str], named: str | None
) -> None:
    assert command_named(argv) == named


def test_a_word_that_is_no_command_is_refused_by_the_whole_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given every command, the refusal can name the one meant, whichever module adds it.
    for typo, meant in (("jbos", "jobs"), ("workflwo", "workflow")):
        with pytest.raises(SystemExit):
            build_parser(typo).parse_args([typo])
        assert f"did you mean {meant}?" in capsys.readouterr().err
