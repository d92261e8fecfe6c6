"""taskq.testing declares the jobs of the modules it is given, as a worker of them would."""

from __future__ import annotations

import pytest

import taskq.testing
from taskq import errors

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
