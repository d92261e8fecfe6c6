"""The kinds of job payload, their validation, and which kinds a worker allows.

- ``call``: a Python callable by import path, ``{"target": "pkg.mod:func",
  "args": [...], "kwargs": {...}}``. Allowed from the worker's ``modules``
  only (and their submodules), as Celery's ``-A`` or Dramatiq's module list:
  any importable callable would include ``os:system`` and ``builtins:exec``.
- ``python_exec``: source code sent with the job, ``{"code": "...",
  "function": "name", "args": [...], "kwargs": {...}}``.
- ``shell``: a command, ``{"argv": [...], "cwd": "/dir", "env": {...}}``. The
  command inherits the worker's environment with ``env`` laid over it.

``python_exec`` and ``shell`` run arbitrary code chosen by whoever enqueues,
so they run only when the worker's policy enables them
(``taskq.broker.worker_policy.Policy``, which also says which ``call``
targets it runs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar, Literal, TypeAlias, cast

import msgspec

from taskq import errors
from taskq.worker.sandbox.json_value import JsonValue

Kind: TypeAlias = Literal["call", "python_exec", "shell"]

# "pkg.mod:func" or "pkg.mod:Class.method": a module path, a colon, an attribute path.
_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


class PayloadInvalid(errors.TaskqError):
    """A job payload is malformed: unknown kind, missing or mistyped field."""


class CallPayload(msgspec.Struct, frozen=True):
    """Call ``target`` (``"pkg.mod:func"``) with JSON arguments."""

    target: str
    args: list[JsonValue] = msgspec.field(default_factory=list)
    kwargs: dict[str, JsonValue] = msgspec.field(default_factory=dict)
    kind: ClassVar[Literal["call"]] = "call"


class PythonExecPayload(msgspec.Struct, frozen=True):
    """Execute ``code`` as a module, then call its ``function`` with JSON arguments."""

    code: str
    function: str
    args: list[JsonValue] = msgspec.field(default_factory=list)
    kwargs: dict[str, JsonValue] = msgspec.field(default_factory=dict)
    kind: ClassVar[Literal["python_exec"]] = "python_exec"


class ShellPayload(msgspec.Struct, frozen=True):
    """Run ``argv`` (no shell parsing) in ``cwd`` with ``env`` added to the environment."""

    argv: list[str]
    cwd: str | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    kind: ClassVar[Literal["shell"]] = "shell"


Payload: TypeAlias = CallPayload | PythonExecPayload | ShellPayload


def parse_payload(data: Mapping[str, object]) -> Payload:
    """Validate a payload mapping whose ``kind`` key says which kind it is."""
    kind = data.get("kind")
    fields = {key: value for key, value in data.items() if key != "kind"}
    if kind == "call":
        _reject_unknown(kind, fields, {"target", "args", "kwargs"})
        target = _string(kind, fields, "target")
        if not _TARGET.fullmatch(target):
            raise PayloadInvalid(f"call: target {target!r} is not of the form 'pkg.mod:func'")
        return CallPayload(target, _args(kind, fields), _kwargs(kind, fields))
    if kind == "python_exec":
        _reject_unknown(kind, fields, {"code", "function", "args", "kwargs"})
        function = _string(kind, fields, "function")
        if not _IDENTIFIER.fullmatch(function):
            raise PayloadInvalid(f"python_exec: function {function!r} is not an identifier")
        return PythonExecPayload(
            _string(kind, fields, "code"), function, _args(kind, fields), _kwargs(kind, fields)
        )
    if kind == "shell":
        _reject_unknown(kind, fields, {"argv", "cwd", "env"})
        argv = fields.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise PayloadInvalid("shell: argv must be a non-empty list of strings")
        cwd = fields.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise PayloadInvalid("shell: cwd must be a string")
        env = fields.get("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise PayloadInvalid("shell: env must map strings to strings")
        return ShellPayload(cast(list[str], argv), cwd, cast(dict[str, str], env))
    raise PayloadInvalid(f"unknown payload kind {kind!r}; known: call, python_exec, shell")


def payload_to_dict(payload: Payload) -> dict[str, JsonValue]:
    """The payload as a JSON object with its ``kind``, the inverse of ``parse_payload``."""
    if isinstance(payload, CallPayload):
        return {
            "kind": payload.kind,
            "target": payload.target,
            "args": payload.args,
            "kwargs": payload.kwargs,
        }
    if isinstance(payload, PythonExecPayload):
        return {
            "kind": payload.kind,
            "code": payload.code,
            "function": payload.function,
            "args": payload.args,
            "kwargs": payload.kwargs,
        }
    return {
        "kind": payload.kind,
        "argv": list[JsonValue](payload.argv),
        "cwd": payload.cwd,
        "env": dict[str, JsonValue](payload.env),
    }


def _reject_unknown(kind: str, fields: Mapping[str, object], known: set[str]) -> None:
    unknown = sorted(set(fields) - known)
    if unknown:
        raise PayloadInvalid(
            f"{kind}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def _string(kind: str, fields: Mapping[str, object], name: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value:
        raise PayloadInvalid(f"{kind}: {name} must be a non-empty string")
    return value


def _args(kind: str, fields: Mapping[str, object]) -> list[JsonValue]:
    args = fields.get("args", [])
    if not isinstance(args, list):
        raise PayloadInvalid(f"{kind}: args must be a list")
    return cast(list[JsonValue], args)


def _kwargs(kind: str, fields: Mapping[str, object]) -> dict[str, JsonValue]:
    kwargs = fields.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
        raise PayloadInvalid(f"{kind}: kwargs must be an object with string keys")
    return cast(dict[str, JsonValue], kwargs)
