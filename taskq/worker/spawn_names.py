"""A spawn, made ready for its report: steps by name resolved, the whole checked by the store.

A running job's child has no store: ``current_job().spawn(flow)`` sends the
flow's jobs as written, and which of them were given by name
(``taskq.step("pkg.mod:f", ...)``, not ``unchecked``) with the options given
(``sandbox/spawn_message.py``). Before the attempt's report is made, the
worker resolves those as ``client.submit_workflow`` resolves a workflow's
(:meth:`~taskq.broker.client.declarations.DeclarationCache.spec_many`): the
declared options of the newest version a live worker serves, the options
given over them, the arguments bound to its published parameters. Then it
asks the store whether it would take the spawn
(:func:`~taskq.broker.ops.workflows.spawn_check`: its stored parents exist and
are of the job's workflow, no step brings a key of its own...).

- A name no worker declares, a call its parameters refuse, or a spawn the
  store refuses fails the attempt for good (it would fail the same way
  again): the refusal names the step, with the names close to it, and
  nothing is spawned. Left to the report, such a refusal would fail the
  write that carries the worker's other reports.
- A store that cannot be read to resolve names fails the attempt as a store
  failure before its job starts does (``parent_results.with_parents``):
  retried by the job's policy while it has attempts left, its spawn with
  it. One that cannot be read to check the spawn leaves the check to the
  report's write, which fails the attempt alone should it refuse then.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from taskq import errors
from taskq.broker.client.declarations import SPAWN_OPT_OUT, DeclarationCache, NamedCall, named
from taskq.broker.client.specs import validate_spec
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workflows import spawn_check, spawn_refusal
from taskq.broker.records import JobSpec, Lease, WorkflowSubmission
from taskq.job_context import NamedStep
from taskq.retry import exception_name
from taskq.worker.sandbox.outcome import Outcome, Status, error_info
from taskq.worker.store_runner import Run


class SpawnNames:
    """Resolves the steps by name of the spawns of a worker's jobs with the store's declarations."""

    def __init__(self, run: Run, declarations: DeclarationCache | None = None) -> None:
        self._run = run
        self._declarations = declarations or DeclarationCache(opt_out=SPAWN_OPT_OUT)

    async def checked(self, outcome: Outcome, lease: Lease) -> Outcome:
        """``outcome`` of the attempt under ``lease``, its spawn resolved and checked by the
        store; or failed, spawning nothing (see the module's doc)."""
        if outcome.spawn_by_name:
            outcome = await self.resolved(outcome)
        if outcome.spawn is None:
            return outcome  # refused by name: failed already
        try:
            await self._run(spawn_check(lease.job_id, lease.token, outcome.spawn))
        except errors.InvalidJob as exc:
            return refused(outcome, exc)
        except errors.TaskqError:
            pass  # unread: the report's write checks it again
        return outcome

    async def resolved(self, outcome: Outcome) -> Outcome:
        """``outcome`` with its spawn's steps by name resolved; or failed, spawning nothing."""
        assert outcome.spawn is not None, "only a spawn has steps by name"
        try:
            spawn = await self._run(
                resolve_spawn(outcome.spawn, outcome.spawn_by_name, self._declarations)
            )
        except errors.InvalidJob as exc:
            return refused(outcome, exc)
        except errors.TaskqError as exc:
            return failed(
                outcome,
                exception_name(type(exc)),
                f"its spawn's steps by name could not be resolved, nothing was spawned: {exc}",
            )
        except (ValueError, TypeError, KeyError) as exc:
            # A declaration stored malformed (no worker writes one, but a store is
            # shared): the attempt fails for good, the slot lives on.
            return failed(
                outcome,
                exception_name(type(exc)),
                f"its spawn's steps by name could not be resolved, nothing was spawned: {exc}",
                give_up="permanent",
            )
        return with_spawn(outcome, spawn)


def resolve_spawn(
    spawn: WorkflowSubmission, steps: Sequence[NamedStep], declarations: DeclarationCache
) -> Op[WorkflowSubmission]:
    """``spawn`` with the jobs of ``steps`` as their declarations make them, all or none.

    :class:`taskq.errors.InvalidJob` (``UnknownFunction`` for a name no worker
    declares) names the first step refused.
    """
    calls = [_call(spawn.jobs[step.position], step) for step in steps]
    resolved = yield from declarations.spec_many(calls)
    jobs = list(spawn.jobs)
    for step, job in zip(steps, resolved, strict=True):
        try:
            validate_spec(job)
        except errors.InvalidJob as exc:
            raise named(exc, step.where) from None
        jobs[step.position] = job
    return msgspec.structs.replace(spawn, jobs=tuple(jobs))


def with_spawn(outcome: Outcome, spawn: WorkflowSubmission) -> Outcome:
    """``outcome`` with its spawn resolved: nothing left to resolve."""
    return msgspec.structs.replace(outcome, spawn=spawn, spawn_by_name=())


def refused(outcome: Outcome, exc: errors.InvalidJob) -> Outcome:
    """The attempt failed for good: its spawn, or a step by name of it, was refused."""
    return failed(outcome, exception_name(type(exc)), spawn_refusal(exc), give_up="permanent")


def failed(outcome: Outcome, type_name: str, message: str, give_up: str = "") -> Outcome:
    """``outcome``'s attempt failed with this error: no result, nothing spawned."""
    return msgspec.structs.replace(
        outcome,
        status=Status.ERROR,
        result_json=None,
        error=error_info(type_name, message),
        lineage=(),
        retry_after=None,
        give_up=give_up,
        spawn=None,
        spawn_by_name=(),
    )


def _call(job: JobSpec, step: NamedStep) -> NamedCall:
    """The call by name that made ``job``: its target and arguments, the options it was given."""
    payload = job.payload
    options = {name: getattr(job, name) for name in step.options if name != "kwargs"}
    options["kwargs"] = payload["kwargs"]
    return NamedCall(payload["target"], payload["args"], options, step.where)
