"""A job's options are declared once (``JobOptions``): call_spec, the HTTP body, the CLI follow."""

from __future__ import annotations

import argparse
import inspect

import msgspec

from taskq.broker.client import job_options
from taskq.broker.client.client_base import SUBMIT_OPTIONS, call_spec
from taskq.cli import job_options as cli_options
from taskq.server import bodies

_OPTIONS = job_options.JobOptions.__struct_fields__


def test_call_spec_takes_each_option_with_its_declared_default() -> None:
    parameters = inspect.signature(call_spec).parameters
    declared = job_options.JobOptions()
    for name in _OPTIONS:
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        given = parameters[name].default
        assert given == getattr(declared, name) or (
            given in ((), None) and not getattr(declared, name)
        )
    # The call's keyword arguments, who submits, the retry policy and the jobs it runs
    # after are call_spec's own.
    assert {*_OPTIONS, "kwargs", "submitter", "retry", "after", "run_anyway"} == SUBMIT_OPTIONS


def test_the_http_body_is_the_options_and_the_call() -> None:
    assert set(bodies.JobRequest.__struct_fields__) == {*_OPTIONS, "target", "args", "kwargs"}
    sent = msgspec.json.decode(b'{"target": "m:f", "queue": "q"}', type=bodies.JobRequest)
    assert sent.max_attempts == 3  # the HTTP API's default, as it always was
    spec = sent.spec("token", idempotency_key="header")
    assert (spec.queue, spec.submitter, spec.idempotency_key) == ("q", "token", "header")


def test_the_command_line_flags_take_the_declared_defaults_and_help() -> None:
    parser = argparse.ArgumentParser()
    cli_options.add_job_options(parser)
    flags = {action.dest: action for action in parser._actions}
    for name in ("queue", "priority", "max_attempts"):
        assert flags[name].default == job_options.default(name)
        assert flags[name].help == job_options.described(name)
