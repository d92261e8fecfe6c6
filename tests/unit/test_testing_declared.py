"""taskq.testing declares the jobs of the modules it is given, as a worker of them would."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import taskq.testing
from taskq import errors
from taskq.broker.ops.functions import Declaration, function_publish
from taskq.broker.ops.plan import Op
from tests.support.importing_modules import write_importing_modules

GREET = "tests.support.declared_jobs:greet"


def test_a_temporary_client_declares_its_modules_jobs() -> None:
    with taskq.testing.temporary_client(modules=["tests.support.declared_jobs"]) as client:
        job = client.get(client.submit(GREET, "ann", kwargs={"greeting": "hi"}).id)
        assert (job.queue, job.max_attempts, job.labels) == ("declared", 2, ("test",))
        handle = client.submit("tests.support.declared_jobs:area", 2, kwargs={"height": 3})
        taskq.testing.run_due(client)
        assert handle.result(timeout=0) == 6
        assert GREET in {function.name for function in client.functions()}


def test_without_modules_a_name_is_found_only_where_it_imports() -> None:
    with taskq.testing.temporary_client() as client:
        # Declared by no worker, but this process imports it: its declared options.
        job = client.get(client.submit(GREET, "ann").id)
        assert (job.queue, job.max_attempts, job.labels) == ("declared", 2, ("test",))
        missing = "tests.support.no_such_module:greet"
        with pytest.raises(errors.UnknownFunction, match="no worker has declared"):
            client.submit(missing, "ann")
        assert client.submit(missing, "ann", unchecked=True).status() is taskq.JobState.QUEUED


@pytest.fixture
def lab_modules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """Two modules on the import path, the second importing the first's job at top level;
    forgotten by ``sys.modules`` afterwards."""
    modules = write_importing_modules(tmp_path, "_inline")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield modules
    for module in modules:
        sys.modules.pop(module, None)


def test_a_job_one_module_imports_from_another_is_published_once(
    lab_modules: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a worker of ``--modules lab_images_inline,lab_thumbs_inline`` publishes them:
    resize once, though both modules hold it.

    Publishing it twice leaves the store as once would (each row is set, none
    added: one version, listed once) and temporary_client emits no event, so
    what is published is watched where it is handed to the store."""
    published: list[list[str]] = []

    def watched(worker_id: str, declarations: Sequence[Declaration], **kwargs: Any) -> Op[None]:
        published.append([each.name for each in declarations])
        return function_publish(worker_id, declarations, **kwargs)

    monkeypatch.setattr(taskq.testing, "function_publish", watched)
    with taskq.testing.temporary_client(modules=lab_modules) as client:
        assert published == [["lab_images_inline:resize", "lab_thumbs_inline:thumb"]]
        listed = [(function.name, function.versions) for function in client.functions()]
        assert listed == [("lab_images_inline:resize", 1), ("lab_thumbs_inline:thumb", 1)]
        handle = client.submit("lab_thumbs_inline:thumb", "in.png")
        taskq.testing.run_due(client)
        assert handle.result(timeout=0) == "in.png"
