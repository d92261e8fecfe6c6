"""A job's options are declared once (``JobOptions``): call_spec, the HTTP body, the CLI follow."""

from __future__ import annotations

import argparse
import inspect
import pathlib

import msgspec
import pytest

from taskq import errors
from taskq.broker.client import job_options
from taskq.broker.client.client import Client, JobHandle
from taskq.broker.client.job_request import JobRequest
from taskq.broker.client.specs import SUBMIT_OPTIONS, call_spec, shell_spec
from taskq.broker.records import JobSpec
from taskq.cli import job_options as cli_options
from taskq.cli.main import main

_OPTIONS = job_options.JobOptions.__struct_fields__


def test_call_spec_takes_each_option_with_its_declared_default_or_the_spec_has_it() -> None:
    parameters = inspect.signature(call_spec).parameters
    declared = job_options.JobOptions()
    bare = call_spec("m:f")
    for name in _OPTIONS:
        if name not in parameters:
            # Not yet a keyword of call_spec: a JobSpec field that completed() sets.
            assert getattr(bare, name) == getattr(declared, name), name
            continue
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        given = parameters[name].default
        assert given == getattr(declared, name) or (
            given in ((), None) and not getattr(declared, name)
        )
    # The call's keyword arguments, who submits and the retry policy are call_spec's own.
    assert SUBMIT_OPTIONS - {"kwargs", "submitter", "retry"} == set(_OPTIONS)


def test_the_http_body_is_the_options_and_the_call() -> None:
    assert set(JobRequest.__struct_fields__) == {
        *_OPTIONS,
        "target",
        "args",
        "kwargs",
        "unchecked",
        "retry",
    }
    sent = msgspec.json.decode(b'{"target": "m:f", "queue": "q"}', type=JobRequest)
    assert sent.max_attempts == 3  # the HTTP API's default, as it always was
    spec = sent.spec("token", idempotency_key="header")
    assert (spec.queue, spec.submitter, spec.idempotency_key) == ("q", "token", "header")
    assert (spec.after, spec.run_anyway) == ((), False)


def test_a_job_built_in_python_goes_over_http_as_built() -> None:
    spec = call_spec(
        "m:f", [1], {"x": 2}, queue="q", max_attempts=None, labels=("gpu",), retry={"base": 2.0}
    )
    sent = msgspec.json.decode(msgspec.json.encode(JobRequest.of_spec(spec)), type=JobRequest)
    assert sent.unchecked
    assert msgspec.json.encode(sent.spec(spec.submitter)) == msgspec.json.encode(spec)
    shell = shell_spec("true")
    with pytest.raises(errors.NotOverHttp, match="shell"):
        JobRequest.of_spec(shell)


def test_a_body_that_names_its_parents_reaches_the_spec() -> None:
    body = b'{"target": "m:f", "after": [12, 13], "run_anyway": true}'
    spec = msgspec.json.decode(body, type=JobRequest).spec("token")
    assert (spec.after, spec.run_anyway) == ((12, 13), True)
    with pytest.raises(msgspec.ValidationError, match=r"\$\.after\[1\]"):
        msgspec.json.decode(b'{"target": "m:f", "after": [1, "x"]}', type=JobRequest)


def _submit_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    cli_options.add_call_arguments(parser)
    cli_options.add_job_options(parser)
    cli_options.add_submit_options(parser)
    return parser


def _parsed_spec(args: argparse.Namespace) -> JobSpec:
    """The job of an unchecked submit (or schedule) of the parsed command line."""
    options = cli_options.job_options(args, submitter="me")
    return call_spec(args.target, args.args, args.kwargs, **options)


def _spec(words: list[str]) -> JobSpec:
    return _parsed_spec(_submit_parser().parse_args(["m:f", *words]))


def test_every_option_has_a_flag_with_its_declared_default_and_help() -> None:
    flags = {action.dest: action for action in _submit_parser()._actions}
    for option in job_options.declared():
        for flag in option.flags:
            dest = f"{option.name}.{flag.key}" if flag.key else option.name
            assert flag.name in flags[dest].option_strings
            assert flags[dest].help == (flag.help or option.description)
            # Left out, a flag is None, so that a submit by name tells it from one given
            # (the declared default then stands: test_flags_left_out_give_the_declared_options).
            assert flags[dest].default is None
    for name in ("queue", "priority", "max_attempts"):
        assert flags[name].help == job_options.described(name)


def test_flags_left_out_give_the_declared_options() -> None:
    spec = _spec([])
    declared = job_options.JobOptions()
    for name in _OPTIONS:
        assert getattr(spec, name) == getattr(declared, name), name


def test_the_flags_reach_the_spec() -> None:
    spec = _spec(
        [
            *("--queue", "q", "--priority", "5", "--max-attempts", "2", "--timeout", "10m"),
            *("--memory", "1GiB", "--cpu", "30", "--label", "gpu", "--label", "big"),
            *("--at", "2026-12-01T09:00+00:00", "--key", "k", "--after", "12,13", "--run-anyway"),
        ]
    )
    assert (spec.queue, spec.priority, spec.max_attempts, spec.timeout) == ("q", 5, 2, 600.0)
    assert spec.limits == {"memory_bytes": "1GiB", "cpu_seconds": 30}
    assert list(spec.labels) == ["gpu", "big"]
    assert (spec.run_at, spec.idempotency_key) == (1796115600.0, "k")
    assert (spec.after, spec.run_anyway) == ((12, 13), True)


def test_a_schedule_takes_no_flag_of_one_submit() -> None:
    parser = argparse.ArgumentParser()
    cli_options.add_call_arguments(parser)
    cli_options.add_job_options(parser)
    options = {flag for action in parser._actions for flag in action.option_strings}
    assert not options & {"--delay", "--at", "--key", "--after", "--run-anyway"}
    spec = _parsed_spec(parser.parse_args(["m:f", "--queue", "q"]))
    assert (spec.queue, spec.delay, spec.after) == ("q", 0.0, ())


def test_after_takes_job_ids_separated_by_commas() -> None:
    with pytest.raises(argparse.ArgumentError, match=r"separated by commas, e.g\. 12,13"):
        _submit_parser().parse_args(["m:f", "--after", "12,x"])


def test_after_given_again_adds_its_jobs_after_the_ones_before() -> None:
    assert _spec(["--after", "2135", "--after", "2136,2137"]).after == (2135, 2136, 2137)
    assert _spec(["--after", "7,3", "--after", "5"]).after == (7, 3, 5)  # in the order given


def test_taskq_submit_refuses_a_job_named_twice_across_after_flags(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    submitted: list[JobSpec] = []
    monkeypatch.setattr(Client, "submit_many", lambda _, specs: submitted.extend(specs))
    store = f"sqlite:///{tmp_path / 'store.db'}"
    argv = ["submit", "--store", store, "--shell", "true", "--after", "12,13", "--after", "12"]
    assert main(argv) == 2
    assert capsys.readouterr().err == "taskq: error: --after: job 12 given more than once\n"
    assert submitted == []


@pytest.mark.parametrize("kind", [["m:f", "--unchecked"], ["--shell", "true"]])
def test_taskq_submit_hands_the_parents_to_every_kind_of_job(
    kind: list[str], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[JobSpec] = []

    def submit_many(client: Client, specs: list[JobSpec]) -> list[JobHandle]:
        submitted.extend(specs)
        return [JobHandle(client, index) for index, _ in enumerate(specs, 1)]

    monkeypatch.setattr(Client, "submit_many", submit_many)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    argv = ["submit", "--store", store, *kind, "--after", "12,13", "--run-anyway", "--key", "k"]
    assert main(argv) == 0
    [spec] = submitted
    assert (spec.after, spec.run_anyway, spec.idempotency_key) == ((12, 13), True, "k")
