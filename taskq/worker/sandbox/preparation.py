"""How a claimed job becomes a request for a sandbox child: once, before its slot runs it.

A job comes from the store with its payload as JSON and its limits as the
job asked for them (checked at enqueue, against nothing of this worker's).
``JobPreparer.prepare`` parses the payload, applies the worker's policy
(which kinds run, and ``call`` targets from which modules) and lowers the
limits to the worker's maximums, in that one place: the sandbox, its
children and the report all take the request as it is.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

from taskq.broker.limits import Limits, LimitsInvalid, parse_limits
from taskq.broker.records import ClaimedJob
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox.outcome import Outcome, Status, error_info, refused_outcome
from taskq.worker.sandbox.payloads import CallPayload, Payload, PayloadInvalid, parse_payload
from taskq.worker.sandbox.protocol import JobIdentity, JobRequest


class JobPreparer:
    """What this worker lets a job do: run under its policy, within its maximum limits."""

    def __init__(
        self,
        *,
        policy: Policy | None = None,
        worker_max: Limits | None = None,
        import_path: Sequence[str] | None = None,
    ) -> None:
        """``import_path`` is where children import ``call`` targets from (default ``sys.path``)."""
        self.policy = policy or Policy()
        self.worker_max = worker_max or Limits()
        # One list for every request: a pool child is sent it again only when it changes.
        self._import_path = list(sys.path if import_path is None else import_path)
        self._modules = list(self.policy.modules)

    def prepare(self, job: ClaimedJob) -> JobRequest | Outcome:
        """The request to run ``job``; or its outcome, when it is malformed or refused."""
        try:
            payload = parse_payload({"kind": job.kind.value, **job.payload})
            limits = self._limits_asked(job)
        except (PayloadInvalid, LimitsInvalid) as exc:
            return Outcome(Status.RESULT_INVALID, error=error_info(type(exc).__name__, str(exc)))
        identity = JobIdentity(
            job.lease.job_id,
            job.attempt,
            job.queue,
            job.max_attempts,
            job.checkpoint_json,
            job.parent_count,
        )
        return self.request(payload, limits, identity)

    def request(
        self, payload: Payload, limits: Limits, job: JobIdentity | None = None
    ) -> JobRequest | Outcome:
        """The request to run ``payload`` within ``limits`` lowered to the worker's maximums.

        Or the outcome of a payload the policy refuses: nothing is run then.
        """
        target = payload.target if isinstance(payload, CallPayload) else None
        refusal = self.policy.refusal(payload.kind, target)
        if refusal is not None:
            return refused_outcome(refusal)
        applied = limits.bounded_by(self.worker_max)
        return JobRequest(
            payload,
            applied,
            self._import_path,
            self._modules,
            job or JobIdentity(),
            asked=None if applied == limits else limits,
        )

    def _limits_asked(self, job: ClaimedJob) -> Limits:
        """The job's limits, with the worker's maximums where it names none.

        Its ``timeout`` is its wall clock. Parsed here once; lowered in ``request``.
        """
        if not job.limits and job.timeout is None:
            return self.worker_max
        limits = parse_limits(job.limits, defaults=self.worker_max)
        if job.timeout is not None:
            limits = dataclasses.replace(limits, wall_seconds=float(job.timeout))
        return limits
