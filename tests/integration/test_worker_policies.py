"""Which other worker may run a job one worker's policy refused, on both stores.

Workers are stood in for by their registrations (and, for a worker of an
older taskq that records no policy, its declarations); the acceptance tier
runs real workers (tests/acceptance/test_mixed_modules.py).
"""

from __future__ import annotations

import time
import uuid

import taskq
from taskq.broker.ops import plan
from taskq.broker.ops.workers import job_served_elsewhere, worker_register, worker_set_state
from taskq.broker.records import LIVE_SECONDS, ClaimedJob, Lease
from taskq.broker.stores.store import Statement
from taskq.broker.worker_policy import Policy
from tests.support.declared_store import client, declaration, names, serving

__all__ = ["client"]  # the fixture

SHELL = Policy(modules=("tests.support",), allow_shell=True)
NO_SHELL = Policy(modules=("tests.support",), allow_python_exec=True)


def _register(
    client: taskq.Client,
    queue: str,
    policy: Policy | None,
    *,
    labels: tuple[str, ...] = (),
    now: float | None = None,
) -> str:
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    plan.run(
        client.store,
        worker_register(
            worker_id,
            name=worker_id,
            host="h",
            pid=1,
            queues=[queue],
            labels=labels,
            slots=1,
            policy=policy,
            now=now,
        ),
    )
    return worker_id


def _claimed(client: taskq.Client, handle: taskq.JobHandle) -> ClaimedJob:
    """The job as the worker that claimed it holds it (the store need not know the lease)."""
    job = client.get(handle.id)
    return ClaimedJob(
        lease=Lease(job.id, "token"),
        kind=job.kind,
        payload=job.payload,
        queue=job.queue,
        attempt=1,
        max_attempts=job.max_attempts,
        timeout=job.timeout,
        limits=job.limits,
        lease_until=0.0,
    )


def _served(client: taskq.Client, job: ClaimedJob, asking: str) -> bool:
    return plan.run(client.store, job_served_elsewhere(job, worker_id=asking))


def test_a_shell_job_is_served_by_a_live_worker_that_allows_shell(client: taskq.Client) -> None:
    _, queue = names()
    asking = _register(client, queue, NO_SHELL)
    job = _claimed(client, client.submit_shell(["true"], queue=queue))
    assert not _served(client, job, asking)
    _register(client, queue, NO_SHELL)
    _register(client, f"{queue}-other", SHELL)
    assert not _served(client, job, asking), "no other worker of the queue allows shell"
    _register(client, queue, SHELL)
    assert _served(client, job, asking)


def test_a_plain_call_is_served_by_a_worker_that_lists_its_module(client: taskq.Client) -> None:
    _, queue = names()
    target = f"mod_{uuid.uuid4().hex[:8]}.tasks:plain"
    asking = _register(client, queue, Policy(modules=("other",)))
    job = _claimed(client, client.submit(target, queue=queue, unchecked=True))
    _register(client, queue, Policy(modules=("other", "elsewhere"), allow_shell=True))
    assert not _served(client, job, asking)
    _register(client, queue, Policy(modules=(target.partition(".")[0],)))
    assert _served(client, job, asking), "the package lists the module, undeclared as it is"


def test_a_worker_that_recorded_no_policy_serves_what_it_declares(client: taskq.Client) -> None:
    name, queue = names()
    asking = _register(client, queue, NO_SHELL)
    call = _claimed(client, client.submit(name, queue=queue, unchecked=True))
    shell = _claimed(client, client.submit_shell(["true"], queue=queue))
    _register(client, queue, None)
    assert not _served(client, call, asking), "an older worker that declares nothing"
    serving(client, "older", [queue], declaration(name, queue=queue))
    assert _served(client, call, asking)
    # Whatever it allows, it is not known to: the command fails where it was claimed.
    assert not _served(client, shell, asking)


def test_a_worker_that_is_stale_draining_or_the_asker_does_not_count(
    client: taskq.Client,
) -> None:
    _, queue = names()
    asking = _register(client, queue, SHELL)
    job = _claimed(client, client.submit_shell(["true"], queue=queue))
    assert not _served(client, job, asking), "the asking worker allows it, but is the one asking"
    stale = _register(client, queue, SHELL, now=time.time() - LIVE_SECONDS - 60)
    # Any write moves the store's clock on to now, past the stale worker's last heartbeat.
    _register(client, queue, NO_SHELL)
    assert not _served(client, job, asking)
    plan.run(client.store, worker_set_state(stale, "active"))  # and its heartbeat now
    assert _served(client, job, asking)
    plan.run(client.store, worker_set_state(stale, "draining"))
    assert not _served(client, job, asking)


def test_a_worker_without_the_jobs_labels_does_not_count(client: taskq.Client) -> None:
    _, queue = names()
    asking = _register(client, queue, NO_SHELL, labels=("gpu",))
    job = _claimed(client, client.submit_shell(["true"], queue=queue, labels=["gpu"]))
    _register(client, queue, SHELL, labels=("cpu",))
    assert not _served(client, job, asking), "it would never claim the job"
    _register(client, queue, SHELL, labels=("cpu", "gpu"))
    assert _served(client, job, asking)


def test_the_workers_listed_carry_their_policies(client: taskq.Client) -> None:
    _, queue = names()
    recorded = _register(client, queue, SHELL)
    older = _register(client, queue, None)
    unreadable = _register(client, queue, SHELL)
    # As a later taskq might record it, in a shape this one cannot read.
    client.store.execute(
        [
            Statement(
                "UPDATE workers SET policy = :policy WHERE id = :id",
                {"policy": '{"modules": {"tests.support": "*"}}', "id": unreadable},
            )
        ]
    )
    policies = {worker.id: worker.policy for worker in client.workers()}
    assert policies[recorded] == SHELL
    assert policies[older] is None
    assert policies[unreadable] is None
