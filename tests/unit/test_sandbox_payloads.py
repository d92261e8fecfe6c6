"""Validating payloads of each kind (which ones a worker runs: test_worker_policy.py)."""

from __future__ import annotations

import pytest

from taskq.worker.sandbox.payloads import (
    CallPayload,
    PayloadInvalid,
    PythonExecPayload,
    ShellPayload,
    parse_payload,
    payload_to_dict,
)


@pytest.mark.parametrize(
    "payload",
    [
        CallPayload("pkg.mod:func", [1, "two"], {"three": [3]}),
        CallPayload("pkg.mod:Class.method"),
        PythonExecPayload("def f(x): return x", "f", [1]),
        ShellPayload(["ls", "-l"], cwd="/tmp", env={"LANG": "C"}),
        ShellPayload(["true"]),
    ],
)
def test_payloads_round_trip(payload: CallPayload | PythonExecPayload | ShellPayload) -> None:
    assert parse_payload(payload_to_dict(payload)) == payload


def test_missing_optional_fields_default() -> None:
    assert parse_payload({"kind": "call", "target": "m:f"}) == CallPayload("m:f", [], {})


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        ({"kind": "rpc"}, "unknown payload kind 'rpc'"),
        ({"target": "m:f"}, "unknown payload kind None"),
        ({"kind": "call", "target": "module.func"}, "not of the form 'pkg.mod:func'"),
        ({"kind": "call", "target": "m:f", "arg": []}, "unknown field(s) arg"),
        ({"kind": "call", "target": "m:f", "args": {}}, "args must be a list"),
        ({"kind": "call", "target": "m:f", "kwargs": []}, "kwargs must be an object"),
        ({"kind": "python_exec", "code": "x = 1"}, "function must be a non-empty string"),
        ({"kind": "python_exec", "code": "", "function": "f"}, "code must be a non-empty"),
        ({"kind": "python_exec", "code": "x", "function": "a.b"}, "not an identifier"),
        ({"kind": "shell", "argv": []}, "argv must be a non-empty list of strings"),
        ({"kind": "shell", "argv": "ls -l"}, "argv must be a non-empty list of strings"),
        ({"kind": "shell", "argv": ["ls"], "cwd": 3}, "cwd must be a string"),
        ({"kind": "shell", "argv": ["ls"], "env": {"N": 1}}, "env must map strings to strings"),
    ],
)
def test_mistakes_are_named(data: dict[str, object], complaint: str) -> None:
    with pytest.raises(PayloadInvalid) as caught:
        parse_payload(data)
    assert complaint in str(caught.value)
