"""Many jobs by name at once, on both stores: batches, workflow steps and schedules as declared.

Every path that names a job by ``"pkg.mod:f"`` takes the declared options,
checks the arguments against the declared parameters, and refuses a name no
worker has declared (naming the call at fault, writing nothing), unless it
opts out with ``unchecked``. Workers are stood in for by their writes
(tests/support/declared_store.py).
"""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.schedules import schedule_fire_due
from tests.support.declared_store import client, declared

__all__ = ["client"]  # the fixture


def _jobs(client: taskq.Client, queue: str) -> list[taskq.Job]:
    return client.list(taskq.JobQuery(queue=queue))


def test_submit_many_by_name_takes_the_declared_options_for_every_call(
    client: taskq.Client,
) -> None:
    name, queue, _ = declared(client, max_attempts=5, priority=4)
    handles = client.submit_many(name, [("a.txt",), {"path": "b.txt", "lower": False}])
    jobs = [client.get(handle.id) for handle in handles]
    assert [(job.queue, job.max_attempts, job.priority) for job in jobs] == [(queue, 5, 4)] * 2
    assert [job.payload["kwargs"] for job in jobs] == [{}, {"path": "b.txt", "lower": False}]


def test_submit_many_by_name_refuses_the_whole_batch_naming_the_call(
    client: taskq.Client,
) -> None:
    name, queue, misspelt = declared(client)
    with pytest.raises(
        errors.InvalidJob,
        match=r"^entry 2 of the batch \(position 1\): .*missing a required argument: 'path'",
    ):
        client.submit_many(name, [("a.txt",), {"lower": True}])
    with pytest.raises(
        errors.UnknownFunction,
        match=rf"^entry 1 of the batch \(position 0\): no worker has declared {misspelt}",
    ):
        client.submit_many(misspelt, [("a.txt",)])
    assert _jobs(client, queue) == []

    [handle] = client.submit_many(misspelt, [("a.txt",)], unchecked=True)
    job = client.get(handle.id)
    assert (job.payload["target"], job.queue) == (misspelt, "default")


@pytest.mark.anyio
async def test_the_async_submit_many_by_name_is_checked_the_same(url: str) -> None:
    async with taskq.AsyncClient(url) as client:
        client.declarations.seconds = 0.0
        with taskq.Client(url) as blocking:
            name, _, misspelt = declared(blocking, max_attempts=6)
        with pytest.raises(
            errors.UnknownFunction,
            match=r"^entry 1 of the batch \(position 0\): no worker has declared",
        ):
            await client.submit_many(misspelt, [("a.txt",)])
        [handle] = await client.submit_many(name, [("a.txt",)])
        assert (await client.get(handle.id)).max_attempts == 6


def test_workflow_steps_by_name_take_the_declared_options(client: taskq.Client) -> None:
    name, queue, _ = declared(client, max_attempts=5)
    flow = taskq.step(name, "a.txt").then(taskq.step(name, "b.txt", priority=9))
    handle = client.submit_workflow(flow)
    first, second = (client.get(job.id) for job in handle.jobs(flow))
    assert (first.queue, first.max_attempts, first.priority) == (queue, 5, 0)
    assert (second.queue, second.max_attempts, second.priority) == (queue, 5, 9)


def test_a_workflow_with_a_bad_step_by_name_is_refused_whole(client: taskq.Client) -> None:
    name, queue, misspelt = declared(client)
    unknown = taskq.step(name, "a.txt").then(taskq.step(misspelt, "b.txt"))
    with pytest.raises(errors.UnknownFunction, match=r"step count_word\('b.txt'\): no worker"):
        client.submit_workflow(unknown)
    bad_call = taskq.group(taskq.step(name, "a.txt"), taskq.step(name))
    with pytest.raises(errors.InvalidJob, match=r"step count_words\(\): .*'path'"):
        client.submit_workflow(bad_call)
    assert _jobs(client, queue) == []

    opted_out = taskq.step(name, "a.txt").then(
        taskq.step(misspelt, "b.txt", queue=queue, unchecked=True)
    )
    handle = client.submit_workflow(opted_out)
    assert len(handle.jobs(opted_out)) == 2


def test_a_schedule_by_name_stores_the_declared_options_its_ticks_enqueue(
    client: taskq.Client,
) -> None:
    name, queue, _ = declared(client, max_attempts=5, timeout=60.0)
    call = taskq.NamedCall(name, ("a.txt",), {"priority": 3})
    added = client.add_schedule(f"s-{queue}", call, every_seconds=60)
    assert (added.schedule.spec["queue"], added.schedule.spec["priority"]) == (queue, 3)
    plan.run(client.store, schedule_fire_due(now=added.schedule.next_fire_at + 1))
    [fired] = _jobs(client, queue)
    assert (fired.max_attempts, fired.timeout, fired.priority) == (5, 60.0, 3)


def test_a_schedule_of_an_undeclared_name_is_refused_unless_unchecked(
    client: taskq.Client,
) -> None:
    name, queue, misspelt = declared(client)
    refused: list[object] = [
        taskq.NamedCall(misspelt, ("a.txt",)),
        taskq.call_spec(misspelt, ["a.txt"], queue=queue),
    ]
    for job in refused:
        with pytest.raises(errors.UnknownFunction, match=f"did you mean {name}"):
            client.add_schedule(f"s-{queue}", job, every_seconds=60)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidJob, match="unexpected keyword argument 'lowr'"):
        client.add_schedule(
            f"s-{queue}", taskq.NamedCall(name, ("a",), {"kwargs": {"lowr": 1}}), every_seconds=60
        )
    assert [s for s in client.schedules() if s.name == f"s-{queue}"] == []

    call = taskq.NamedCall(misspelt, ("a.txt",), {"queue": queue})
    added = client.add_schedule(f"s-{queue}", call, every_seconds=60, unchecked=True)
    assert added.schedule.spec["queue"] == queue
