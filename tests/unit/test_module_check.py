"""The check of a worker's ``--modules``: in its first pool child, or in a child of its own."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.limits import Limits
from taskq.broker.ops.functions import Declaration
from taskq.broker.worker_policy import Policy
from taskq.worker.events import EventLog
from taskq.worker.module_check import ModuleCheck, undeclared_queues
from taskq.worker.publishing import Publisher
from taskq.worker.sandbox.child_process import ChildProcess, ChildSetup
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.sandbox.outcome import Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox
from tests.support.importing_modules import write_importing_modules

Check = Callable[[Sequence[str]], ModuleCheck]


@pytest.fixture(params=["pool child", "own child"])
def check(request: pytest.FixtureRequest) -> Iterator[Check]:
    """Starts the check as a worker of each isolation does; stops any pool child after."""
    started: list[ChildProcess] = []

    def in_pool_child(modules: Sequence[str]) -> ModuleCheck:
        setup = ChildSetup(
            env=job_environment(os.environ), modules=tuple(modules), import_path=tuple(sys.path)
        )
        read_fd, write_fd = os.pipe()
        child = ChildProcess.start("pool", setup, ceiling=Limits(), report_fd=write_fd)
        started.append(child)
        return ModuleCheck.in_pool_child(modules, read_fd, child)

    def in_own_child(modules: Sequence[str]) -> ModuleCheck:
        return ModuleCheck.in_own_child(
            modules, import_path=sys.path, env=job_environment(os.environ)
        )

    yield in_pool_child if request.param == "pool child" else in_own_child
    for child in started:
        child.close()


def test_the_check_gives_the_jobs_the_modules_declare(check: Check) -> None:
    declared = check(["tests.support.jobs", "tests.support.declared_jobs"]).wait()
    names = {declaration.name for declaration in declared}
    assert "tests.support.declared_jobs:greet" in names
    assert "tests.support.declared_jobs:plain_multiply" not in names


WHERE_TO_RUN = (
    "; the worker imports from its sys.path: run it from the folder that holds {0} "
    "with PYTHONPATH=. (or install {0} into the worker's environment)"
)


@pytest.mark.parametrize(
    ("module", "error"),
    [
        # The package imports, without the module: not where to run it from, which was right.
        ("tests.suport", "tests has no module suport; did you mean tests.support?"),
        (
            "taskq_tests_nowhere.images",
            "ModuleNotFoundError: No module named 'taskq_tests_nowhere'"
            + WHERE_TO_RUN.format("taskq_tests_nowhere"),
        ),
        # A module that is found but lacks what it imports: nothing to do with where to run.
        (
            "tests.support.importable_broken",
            "ModuleNotFoundError: No module named 'taskq_tests_missing_dependency'",
        ),
    ],
)
def test_a_module_that_does_not_import_is_named_with_its_error(
    check: Check, module: str, error: str
) -> None:
    with pytest.raises(errors.ConfigError) as raised:
        check(["tests.support.jobs", module]).wait()
    assert str(raised.value) == f"cannot import --modules: {module}: {error}"


def test_a_module_that_ends_the_child_is_told_by_the_childs_last_words(check: Check) -> None:
    with pytest.raises(errors.ConfigError) as raised:
        check(["tests.support.exits_on_import"]).wait()
    assert str(raised.value) == (
        "importing --modules tests.support.exits_on_import failed: "
        "exits_on_import: leaving before the report"
    )


@pytest.mark.anyio
async def test_a_pool_child_has_imported_the_workers_modules_before_its_first_job() -> None:
    # The module the job asks about is none the job's own imports bring.
    modules = ("tests.support.jobs", "tests.support.declared_jobs")
    env = job_environment(os.environ)
    setup = ChildSetup(env=env, modules=modules, import_path=tuple(sys.path))
    preparer = JobPreparer(policy=Policy(modules=modules))
    async with PoolSandbox(preparer=preparer, setup=setup) as pool:
        asked = CallPayload("tests.support.jobs:is_imported", ["tests.support.declared_jobs"])
        outcome = await pool.run(asked, Limits(wall_seconds=10))
    assert outcome.status is Status.SUCCEEDED, outcome
    assert outcome.result is True


def test_a_file_given_as_a_module_is_told_the_module_to_give(
    check: Check, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Not "No module named 'jobs.py'; 'jobs' is not a package": the module meant.
    # tests/support/jobs.py is on the import path as tests.support.jobs, not as jobs.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.ConfigError) as refused:
        check(["jobs.py"]).wait()
    assert str(refused.value) == (
        "cannot import --modules: jobs.py: 'jobs.py' is a file; modules takes module names: "
        "--modules jobs, with the folder that holds jobs.py on the import path (PYTHONPATH)"
    )


def test_a_job_one_module_imports_from_another_is_declared_and_published_once(
    check: Check, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--modules lab_images,lab_thumbs``, where lab_thumbs imports lab_images' resize:
    both modules hold resize, which the worker declares, and says it published, once."""
    modules = write_importing_modules(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = check(modules).wait()
    assert [each.name for each in declared] == ["lab_images:resize", "lab_thumbs:thumb"]

    told = io.StringIO()
    events = EventLog(told, format="json")
    store = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    try:
        Publisher("w-dup", declared, events).publish(store)
    finally:
        store.close()
    events.flush()
    [published] = [json.loads(line) for line in told.getvalue().splitlines()]
    assert (published["event"], published["jobs"]) == (
        "jobs_published",
        "lab_images:resize,lab_thumbs:thumb",
    )


def test_the_queues_of_declared_jobs_left_out_are_named() -> None:
    declared = [
        Declaration("lab:a"),
        Declaration("lab:b", options={"queue": "texts"}),
        Declaration("lab:c", options={"queue": "images"}),
        Declaration("lab:d", options={"queue": "texts"}),
    ]
    assert undeclared_queues(declared, ["default"]) == ["texts", "images"]
    assert undeclared_queues(declared, ["default", "texts", "images"]) == []
