"""A mistyped option or command is named with the closest one the command takes, in the one
error line; an option is given whole, never abbreviated."""

from __future__ import annotations

import pytest

from taskq.cli.main import main
from taskq.one_line_parser import OneLineParser
from taskq.worker.main import build_parser as worker_parser


def _error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_an_unrecognized_option_is_named_with_the_closest_of_its_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _error_line(capsys, "jobs", "--sate", "failed") == (
        "taskq: error: unrecognized arguments: --sate failed (did you mean --state?) "
        "(see 'taskq jobs --help')"
    )
    # Each, by the command's own options: --json is workflow retry's, --limit is jobs'.
    assert "(did you mean --json?)" in _error_line(capsys, "workflow", "retry", "1", "--jsn")
    both = _error_line(capsys, "jobs", "--stae", "failed", "--limt=3")
    assert "(did you mean --state and --limit?)" in both
    # Nothing close: argparse's words alone. The dashes make no likeness: --delay, which
    # schedule add does not take, is not --replace.
    assert _error_line(capsys, "jobs", "--xyz") == (
        "taskq: error: unrecognized arguments: --xyz (see 'taskq jobs --help')"
    )
    assert _error_line(capsys, "schedule", "add", "n", "--every", "1d", "m:f", "--delay", "1m") == (
        "taskq: error: unrecognized arguments: --delay 1m (see 'taskq schedule add --help')"
    )


def test_words_of_a_list_given_after_an_option_are_told_to_go_before_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # argparse gives a list its words up to the first option, and none after it.
    assert _error_line(capsys, "submit", "--unchecked", "pkg.mod:f", "1", "--wait", "2") == (
        "taskq: error: unrecognized arguments: 2; the ARG words go together, before any "
        "option (see 'taskq submit --help')"
    )
    assert "; the ID words go together" in _error_line(capsys, "cancel", "1", "--json", "2")
    # A command that takes no list of words, and an unknown option's value, get no such hint.
    assert "go together" not in _error_line(capsys, "jobs", "extra")
    assert "go together" not in _error_line(capsys, "submit", "pkg.mod:f", "--delya", "1m")


def test_a_mistyped_option_that_took_the_words_after_it_wrong_is_named_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --qeue is refused as an unknown word, so x is taken as the call and pkg.mod:f as
    # its argument, which is not JSON: the error argparse raises first.
    line = _error_line(capsys, "submit", "--qeue", "x", "pkg.mod:f")
    assert line.startswith("taskq: error: argument ARG: 'pkg.mod:f' is not JSON")
    assert line.endswith("; no option --qeue (did you mean --queue?) (see 'taskq submit --help')")


def test_the_words_after_a_command_are_not_the_top_levels_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _error_line(capsys, "jbos", "--sate", "failed") == (
        "taskq: error: no command 'jbos' (did you mean jobs?) (see 'taskq --help')"
    )
    before = _error_line(capsys, "--stroe", "sqlite:///x.db", "jobs")
    assert before.endswith("; no option --stroe (did you mean --store?) (see 'taskq --help')")


def test_the_worker_names_the_closest_of_its_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        worker_parser().parse_args(["--modulez", "jobs"])
    assert capsys.readouterr().err == (
        "taskq-worker: error: unrecognized arguments: --modulez jobs (did you mean --modules?) "
        "(see 'taskq-worker --help')\n"
    )


def test_a_mistyped_command_is_named_with_the_closest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _error_line(capsys, "sumbit", "x") == (
        "taskq: error: no command 'sumbit' (did you mean submit?) (see 'taskq --help')"
    )
    # An action of a command is named with the command it is under.
    assert _error_line(capsys, "workflow", "shwo", "3") == (
        "taskq: error: no command 'workflow shwo' (did you mean workflow show?) "
        "(see 'taskq workflow --help')"
    )
    # Nothing close: the command given, not argparse's list of them all.
    assert _error_line(capsys, "xyzzy") == "taskq: error: no command 'xyzzy' (see 'taskq --help')"


def test_an_abbreviated_option_is_refused_with_the_option_it_may_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _error_line(capsys, "jobs", "--stat", "failed") == (
        "taskq: error: unrecognized arguments: --stat failed (did you mean --state?) "
        "(see 'taskq jobs --help')"
    )
    assert "(did you mean --limit?)" in _error_line(capsys, "jobs", "--lim=3")
    assert _error_line(capsys, "--sto", "sqlite:///x.db", "jobs").endswith(
        "; no option --sto (did you mean --store?) (see 'taskq --help')"
    )


def _parser_of_commands() -> OneLineParser:
    parser = OneLineParser(prog="prog")
    parser.add_argument("--verbose", action="store_true")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run").add_argument("--state")
    commands.add_parser("status")
    return parser


def _plain_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        _parser_of_commands().parse_args(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_a_plain_parsers_commands_are_named_with_the_closest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _plain_error(capsys, "rnu") == (
        "prog: error: no command 'rnu' (did you mean run?) (see 'prog --help')\n"
    )
    assert _plain_error(capsys, "xyzzy") == "prog: error: no command 'xyzzy' (see 'prog --help')\n"
    assert _parser_of_commands().parse_args(["run"]).command == "run"


def test_a_plain_parser_and_its_commands_take_no_abbreviated_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _plain_error(capsys, "--verb", "run") == (
        "prog: error: unrecognized arguments: --verb (did you mean --verbose?) "
        "(see 'prog --help')\n"
    )
    assert _plain_error(capsys, "run", "--stat", "x") == (
        "prog: error: unrecognized arguments: --stat x (see 'prog --help')\n"
    )
    whole = _parser_of_commands().parse_args(["--verbose", "run", "--state", "x"])
    assert (whole.verbose, whole.state) == (True, "x")
