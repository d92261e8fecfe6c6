"""Declared jobs, functions as targets, the other payload kinds and seed JSON jobs, as submitted.

Only what is written is looked at (no worker): ``tests/acceptance/test_job_api.py``
runs them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors
from taskq.broker.client import declared
from taskq.broker.client.declarations import declared_spec
from taskq.broker.client.seed_jobs import seed_job_specs
from taskq.broker.ops import plan
from taskq.broker.ops.functions import Declaration, function_publish
from taskq.broker.records import Job, PayloadKind
from tests.support import declared_jobs
from tests.support.declared_jobs import area, greet, plain_multiply

GREET = "tests.support.declared_jobs:greet"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[taskq.Client]:
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}", submitter="tester") as opened:
        taskq.set_default_client(opened)
        try:
            yield opened
        finally:
            taskq.set_default_client(None)


def written(client: taskq.Client, handle: taskq.JobHandle) -> Job:
    return client.get(handle.id)


def test_a_declared_job_runs_inline_when_called() -> None:
    assert greet("ann", greeting="hi") == "hi ann!"
    assert greet.__name__ == "greet"
    assert greet.__module__ == "tests.support.declared_jobs"


def test_submit_passes_every_argument_to_the_job_with_the_declared_options(
    client: taskq.Client,
) -> None:
    job = written(client, greet.submit("ann", greeting="hi"))
    assert job.payload == {"target": GREET, "args": ["ann"], "kwargs": {"greeting": "hi"}}
    assert (job.queue, job.max_attempts, job.labels, job.submitter) == (
        "declared",
        2,
        ("test",),
        "tester",
    )


def test_options_change_the_declared_options_for_their_calls_only(client: taskq.Client) -> None:
    moved = greet.options(queue="gpu", priority=5, timeout=30)
    job = written(client, moved.submit("bob"))
    assert (job.queue, job.priority, job.timeout, job.max_attempts) == ("gpu", 5, 30, 2)
    assert written(client, greet.submit("cy")).queue == "declared"
    assert moved("dee") == "hello dee!"


def test_limits_given_go_over_the_declared_ones_limit_by_limit(client: taskq.Client) -> None:
    # --cpu and --memory are separate flags: one given keeps the other as declared.
    capped = greet.options(limits={"memory_bytes": "512MiB", "cpu_seconds": 60})
    job = written(client, capped.options(limits={"cpu_seconds": 10}).submit("ann"))
    assert job.limits == {"memory_bytes": "512MiB", "cpu_seconds": 10}
    by_name = Declaration(name=GREET, options={"limits": {"memory_bytes": 512 * 2**20}})
    spec = declared_spec(by_name, [], None, {"limits": {"cpu_seconds": 10}})
    assert spec.limits == {"memory_bytes": 512 * 2**20, "cpu_seconds": 10}


def test_a_client_submits_declared_jobs_and_module_level_functions(client: taskq.Client) -> None:
    assert written(client, client.submit(area, 2, height=3)).payload == {
        "target": "tests.support.declared_jobs:area",
        "args": [2],
        "kwargs": {"height": 3},
    }
    job = written(client, client.submit(plain_multiply, 2, b=3))
    assert job.payload["target"] == "tests.support.declared_jobs:plain_multiply"
    assert written(client, client.submit(greet.options(queue="q"), "e")).queue == "q"


def test_the_string_form_keeps_its_keyword_options(client: taskq.Client) -> None:
    # As a worker of the module would, so that the name is declared.
    plan.run(client.store, function_publish("w", declared.declared_in(declared_jobs)))
    job = written(client, client.submit(GREET, "ann", queue="s", kwargs={"greeting": "yo"}))
    assert (job.queue, job.payload["kwargs"], job.max_attempts) == ("s", {"greeting": "yo"}, 2)
    with pytest.raises(errors.InvalidJob, match="unknown option"):
        client.submit(GREET, "ann", greeting="yo")


@pytest.mark.parametrize(
    ("submit", "message"),
    [
        (lambda: greet.submit("a", queue="x"), r"unexpected keyword argument 'queue'.*options"),
        (lambda: greet.submit(), "missing a required argument: 'name'"),
        (
            lambda: greet.submit(nme="a"),
            r"missing a required argument: 'name'; and it takes no keyword argument 'nme' "
            r"\(did you mean name\?\)",
        ),
        (
            lambda: greet.submit("a", greting="yo"),
            r"unexpected keyword argument 'greting' \(did you mean greeting\?\)",
        ),
        (
            lambda: area.submit(1, 2, 3),
            r":area\(.*\) refuses these arguments: 3 positional arguments given, it takes 2",
        ),
        (lambda: taskq.Client.submit(taskq.default_client(), lambda: 1), "lambda"),
        (lambda: area.submit_many([[1]]), "a tuple of positional arguments or a dict"),
        (lambda: area.submit(float("nan")), "must be JSON"),
    ],
)
def test_a_call_that_does_not_fit_is_refused_before_anything_is_written(
    client: taskq.Client, submit: Any, message: str
) -> None:
    with pytest.raises(errors.InvalidJob, match=message):
        submit()
    assert client.list() == []


def test_a_mistyped_argument_is_refused_the_same_however_the_job_is_named(
    client: taskq.Client,
) -> None:
    # As a worker of the module would, so that the names are declared.
    plan.run(client.store, function_publish("w", declared.declared_in(declared_jobs)))
    multiply = "tests.support.declared_jobs:plain_multiply"
    refusals = []
    for submit in (
        lambda: client.submit(multiply, "2", 3),
        lambda: client.submit(plain_multiply, "2", 3),
        lambda: client.submit(greet, 5),
        lambda: greet.submit(5),
        lambda: greet.spec(5),
        lambda: greet.step(5),
        lambda: greet.map(["ann", 5]),
        lambda: client.submit_many(greet, [("ann",), (5,)]),
    ):
        with pytest.raises(errors.InvalidJob) as refused:
            submit()
        refusals.append(str(refused.value))
    assert (
        "plain_multiply(a: int, b: int) refuses these arguments: a: int was given '2'"
        in (refusals[0])
    )
    assert refusals[1] == refusals[0]
    assert all("greet(name: str" in each and "was given 5, an int" in each for each in refusals[2:])
    assert client.list() == []


def test_functions_a_worker_cannot_import_by_name_are_refused(client: taskq.Client) -> None:
    def local() -> None: ...

    with pytest.raises(errors.InvalidJob, match="defined inside a function"):
        client.submit(local)
    main_function = type(local)(local.__code__, {"__name__": "__main__"}, "script_job")
    main_function.__module__ = "__main__"
    main_function.__qualname__ = "script_job"
    with pytest.raises(errors.InvalidJob, match="__main__"):
        client.submit(main_function)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queu": "x"}, r"no option 'queu' \(did you mean queue\?\)"),
        ({"kwargs": {}}, "no option 'kwargs'"),
        ({"priority": "high"}, "priority must be a whole number"),
        ({"labels": "gpu"}, "labels"),
    ],
)
def test_bad_options_are_refused_when_the_job_is_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(errors.InvalidJob, match=message):
        taskq.job(**options)
    with pytest.raises(errors.InvalidJob, match=message):
        greet.options(**options)


def test_submit_many_takes_positional_tuples_and_keyword_dicts_in_one_request(
    client: taskq.Client,
) -> None:
    handles = area.submit_many([(2,), {"width": 3, "height": 4}])
    assert [written(client, h).payload["args"] for h in handles] == [[2], []]
    assert written(client, handles[1]).payload["kwargs"] == {"width": 3, "height": 4}
    plan.run(client.store, function_publish("w", declared.declared_in(declared_jobs)))
    by_name = client.submit_many(GREET, [("x",), {"name": "y"}])
    assert [written(client, h).payload["kwargs"] for h in by_name] == [{}, {"name": "y"}]
    with pytest.raises(errors.InvalidJob, match="missing a required argument"):
        area.submit_many([(1,), {}])
    assert len(client.list()) == 4  # the refused batch wrote nothing


def test_the_default_client_is_the_one_set(client: taskq.Client) -> None:
    assert taskq.default_client() is client
    other = taskq.Client(store=client.store)
    bound = taskq.job(client=other)(declared_jobs.plain_multiply)
    assert bound.submit(1, 2).client is other


def test_python_exec_and_shell_jobs(client: taskq.Client) -> None:
    code = written(
        client, client.submit_python("def f(x, y=0): return x + y", "f", 1, kwargs={"y": 2})
    )
    assert code.kind is PayloadKind.PYTHON_EXEC
    assert code.payload == {
        "code": "def f(x, y=0): return x + y",
        "function": "f",
        "args": [1],
        "kwargs": {"y": 2},
    }
    shell = written(
        client, client.submit_shell("ls | wc -l", cwd="/tmp", env={"A": "b"}, queue="sh")
    )
    assert (shell.kind, shell.queue) == (PayloadKind.SHELL, "sh")
    assert shell.payload == {
        "argv": ["/bin/sh", "-c", "ls | wc -l"],
        "cwd": "/tmp",
        "env": {"A": "b"},
    }
    argv = written(client, client.submit_shell(["echo", "a b"]))
    assert argv.payload["argv"] == ["echo", "a b"]
    for bad in (lambda: client.submit_shell(""), lambda: client.submit_python("x", "not a name")):
        with pytest.raises(errors.InvalidJob):
            bad()


def test_seed_json_jobs() -> None:
    [spec] = seed_job_specs(
        {
            "task_id": 42,
            "task_type": "python_exec",
            "payload": {"code": "def f(t): return t", "function": "f", "args": ["x"]},
            "status": "pending",
        },
        queue="seeded",
    )
    assert (spec.kind, spec.idempotency_key, spec.queue) == (
        PayloadKind.PYTHON_EXEC,
        "42",
        "seeded",
    )
    assert spec.payload["args"] == ["x"]
    shell, call = seed_job_specs(
        [
            {"task_type": "shell", "payload": {"command": "ls", "cwd": "/"}},
            {"task_type": "call", "payload": {"target": "m:f", "args": [1]}},
        ]
    )
    assert shell.payload["argv"] == ["/bin/sh", "-c", "ls"]
    assert call.payload == {"target": "m:f", "args": [1], "kwargs": {}}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"task_type": "perl", "payload": {}}, "task_type must be one of"),
        ({"task_type": "call", "payload": {"target": "m:f"}, "extra": 1}, "unknown field"),
        ({"task_type": "call", "payload": {"target": "m:f"}, "status": "done"}, "pending"),
        ({"task_type": "shell", "payload": {"command": "ls", "argv": ["ls"]}}, "one of them"),
        (
            [{"task_type": "python_exec", "payload": {"code": "x"}}],
            r"^entry 1 of the batch \(position 0\): python_exec: function",
        ),
        ([], "empty"),
    ],
)
def test_malformed_seed_json_jobs_are_refused(document: object, message: str) -> None:
    with pytest.raises(errors.InvalidJob, match=message):
        seed_job_specs(document)


def test_errors_are_there_on_import() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", "import taskq; print(taskq.errors.JobFailed.__name__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout == "JobFailed\n"


@pytest.mark.anyio
async def test_an_async_client_submits_declared_jobs_and_functions(tmp_path: Path) -> None:
    async with taskq.AsyncClient(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        declared = await client.submit(greet, "ann", greeting="hi")
        plain = await client.submit(plain_multiply, 2, 3)
        [many] = await client.submit_many(area, [(5,)])
        assert (await client.get(declared.id)).queue == "declared"
        assert (await client.get(plain.id)).payload["args"] == [2, 3]
        assert (await client.get(many.id)).payload["args"] == [5]
