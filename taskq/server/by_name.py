"""The jobs a request names: each as its target's declaration says, unless it is unchecked.

``POST /jobs`` (one job or a batch), ``POST /workflows`` and ``POST /schedules``
make their jobs here, through the client's one resolution of names
(``AsyncClient.declared_specs``): the declared options are the defaults, the
members a job gives win, the arguments are checked against the declared
parameters, and a target no worker has declared is refused (422, with the
closest names), all before anything is written. A job of several is named
as ``label`` says: in a batch by its place (``entry 3 of the batch (position
2): ...``, a bare ``job 2`` reading as a job id), in a workflow by the
position its ``parents`` use (``job 2: ...``).

A job submitted alone (``POST /jobs``, a schedule's job) that the body gives
``run_anyway: true`` without ``after`` is refused (422, ``field: "run_anyway"``),
as the Python clients refuse it (:func:`check_alone`): alone, its parents are
those of ``after``, and the store would drop the option unsaid. A workflow's
job takes it: its parents are the workflow's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from taskq import errors
from taskq.broker.client import declarations
from taskq.broker.client.client import AsyncClient, NamedCall
from taskq.broker.client.declarations import batch_entry
from taskq.broker.client.job_request import JobRequest
from taskq.broker.client.lone_submit import check_alone
from taskq.broker.records import JobSpec


async def request_specs(
    client: AsyncClient,
    jobs: Sequence[JobRequest],
    members: Sequence[Collection[str]],
    submitter: str,
    keys: Sequence[str | None],
    *,
    label: Callable[[int], str] | None = batch_entry,
    alone: bool = True,
) -> list[JobSpec]:
    """The jobs to enqueue, in order, submitted by ``submitter``; all or none.

    ``members``: the members each job's body names (those given, which win
    over the declared options); ``keys``: each job's idempotency key from the
    request's header (a job's own wins). ``label``: how a refusal names the
    job at a position (None: a body of one job, not named). ``alone``: the jobs are
    submitted alone, not as a workflow's, and refuse ``run_anyway`` without ``after``.
    """
    if alone:
        for index, (job, given) in enumerate(zip(jobs, members, strict=True)):
            _check_alone(job, given, label(index) if label is not None else "")
    named = [
        NamedCall(
            job.target,
            job.args,
            job.given(given, submitter, key),
            label(index) if label is not None else "",
        )
        for index, (job, given, key) in enumerate(zip(jobs, members, keys, strict=True))
        if not job.unchecked
    ]
    declared = iter(await client.declared_specs(named) if named else [])
    return [
        job.spec(submitter, key) if job.unchecked else next(declared)
        for job, key in zip(jobs, keys, strict=True)
    ]


def _check_alone(job: JobRequest, given: Collection[str], where: str) -> None:
    """Refuse ``run_anyway`` without ``after`` where the body gives it (a target declared
    ``run_anyway`` is submitted as declared), named as the Python client names it."""
    options = {name: getattr(job, name) for name in ("run_anyway", "after") if name in given}
    try:
        check_alone(options, job.target)
    except errors.InvalidJob as refused:
        raise declarations.named(refused, where) from None
