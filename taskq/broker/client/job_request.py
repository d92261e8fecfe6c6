"""A job as the HTTP API's body carries it: a call and its options (``POST /jobs``).

The server decodes it (``taskq.server.bodies``) and the HTTP client sends it
(:mod:`.http_plans`), so the two cannot disagree on a member.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any

import msgspec

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.client import option_schemas
from taskq.broker.client.job_options import JobOptions
from taskq.broker.client.specs import call_spec
from taskq.broker.limits import with_whole_numbers
from taskq.broker.records import JobSpec, PayloadKind


class JobRequest(JobOptions, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One job: ``target`` ("pkg.module:function") called with JSON arguments, and its options.

    The submitter is not a member: it is the name of the request's token.
    """

    target: Annotated[str, job_validation.TARGET.schema()]
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    # Over HTTP a job has always had 3 attempts unless it or its declaration says otherwise;
    # null takes the queue's default, as a job of the Python client's does.
    max_attempts: Annotated[int, job_validation.ATTEMPTS.schema()] | None = 3
    unchecked: Annotated[
        bool,
        msgspec.Meta(
            description="submit a target no worker has declared (for workers yet to start), "
            "with only the options given; by default a target no worker declares is refused "
            "(422, with the closest declared names) and a declared one takes its declared "
            "options where the job gives none"
        ),
    ] = False

    retry: Annotated[
        Annotated[dict[str, Any], msgspec.Meta(extra_json_schema=option_schemas.retry_schema())]
        | None,
        msgspec.Meta(
            description="the retry policy (taskq.RetryPolicy.to_dict()); null: the queue's, "
            "else the default"
        ),
    ] = None

    def __post_init__(self) -> None:
        # Read from JSON, where 2.0 and 2 are one number (the schema's integer 2). A body
        # built in Python (of_spec) may hold anything: the server's check refuses it whole.
        if isinstance(self.limits, dict):
            msgspec.structs.force_setattr(self, "limits", with_whole_numbers(self.limits))

    def spec(self, submitter: str, idempotency_key: str | None = None) -> JobSpec:
        """The job to enqueue, submitted by ``submitter``; its own key wins over the header's."""
        options = {**self.keywords(), "idempotency_key": self.idempotency_key or idempotency_key}
        return call_spec(
            self.target, self.args, self.kwargs, submitter=submitter, retry=self.retry, **options
        )

    @classmethod
    def of_spec(cls, spec: JobSpec) -> JobRequest:
        """A job built in Python (a call, as :func:`call_spec` makes it) as a body, sent as
        built (``unchecked``: its options are already the declared ones, or the caller's)."""
        if spec.kind is not PayloadKind.CALL:
            raise errors.NotOverHttp(
                f"a {spec.kind.value} job cannot be submitted over HTTP: taskq serve takes calls"
            )
        payload = spec.payload
        return cls(
            target=payload["target"],
            args=list(payload.get("args", ())),
            kwargs=dict(payload.get("kwargs", {})),
            queue=spec.queue,
            priority=spec.priority,
            delay=spec.delay,
            run_at=spec.run_at,
            max_attempts=spec.max_attempts,
            timeout=spec.timeout,
            limits=spec.limits,
            labels=list(spec.labels),
            idempotency_key=spec.idempotency_key,
            after=spec.after,
            run_anyway=spec.run_anyway,
            retry=spec.retry,
            unchecked=True,
        )

    def given(
        self, members: Collection[str], submitter: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """The options of a submit by name: those among the body's ``members``, which win
        over the declared ones, and the call's keyword arguments."""
        options = {name: getattr(self, name) for name in self.keywords() if name in members}
        key = self.idempotency_key or idempotency_key
        if key is not None:
            options["idempotency_key"] = key
        if "retry" in members:
            options["retry"] = self.retry
        return {**options, "kwargs": self.kwargs, "submitter": submitter}
