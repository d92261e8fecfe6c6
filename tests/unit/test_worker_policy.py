"""The policy that says which payloads a worker runs: the worker's and the store's one rule."""

from __future__ import annotations

import pytest

from taskq.broker import worker_policy
from taskq.broker.worker_policy import Policy


def test_policy_enables_kinds_beyond_call() -> None:
    assert Policy().refusal("python_exec") == "python_exec payloads are disabled on this worker"
    assert Policy().refusal("shell") == "shell payloads are disabled on this worker"
    assert Policy(allow_python_exec=True).refusal("python_exec") is None
    assert Policy(allow_shell=True).refusal("shell") is None
    # Each switch enables its own kind only.
    assert Policy(allow_python_exec=True).refusal("shell") is not None
    assert Policy(allow_shell=True).refusal("python_exec") is not None


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        ("mypkg.tasks:resize", True),
        ("mypkg.tasks.images:resize", True),
        ("other:resize", True),
        ("mypkg:resize", False),
        ("mypkg.tasksx:resize", False),
        ("os:system", False),
        ("builtins:exec", False),
        ("subprocess:check_call", False),
    ],
)
def test_call_targets_run_only_from_the_workers_modules(target: str, allowed: bool) -> None:
    policy = Policy(modules=("mypkg.tasks", "other"), allow_python_exec=True, allow_shell=True)
    refusal = policy.refusal("call", target)
    assert (refusal is None) is allowed, refusal
    if not allowed:
        assert refusal is not None
        assert "not among this worker's modules" in refusal
    assert Policy().refusal("call", target) is not None


@pytest.mark.parametrize(
    ("policy", "shown"),
    [
        (Policy(modules=("lab.images", "lab.sims")), "lab.images,lab.sims"),
        (
            Policy(modules=("lab",), allow_python_exec=True, allow_shell=True),
            "lab +python_exec +shell",
        ),
        (Policy(allow_shell=True), "+shell"),
        (Policy(), "nothing"),
        (None, "-"),  # recorded none (an older taskq), or one this taskq cannot read
    ],
)
def test_the_summary_names_the_modules_then_the_other_kinds_allowed(
    policy: Policy | None, shown: str
) -> None:
    assert worker_policy.summary(policy) == shown
