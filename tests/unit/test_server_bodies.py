"""A request body the server refuses: the error class that fits it, the member, and words to read.

A job's member is refused as InvalidJob (in a batch or a workflow naming
the job by its position), a setting's (a queue's limit, a schedule's
timing, a prune's age) as InvalidSetting; a value of the wrong type or out
of its bounds is said in words, with the value sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskq import errors
from taskq.broker.client.job_request import JobRequest
from taskq.server import bodies
from taskq.server.workflows import WorkflowRequest

JOBS = JobRequest | list[JobRequest]
SETTING = errors.InvalidSetting


@pytest.mark.parametrize(
    ("body", "into", "refused", "kind", "field", "message"),
    [
        (
            b'{"target": "m:f", "timeout": "5x"}',
            JOBS,
            errors.InvalidJob,
            errors.InvalidJob,
            "timeout",
            'timeout must be a number or null, got "5x"',
        ),
        (
            b'[{"target": "m:f"}, {"target": "m:f", "priority": 1.5}]',
            JOBS,
            errors.InvalidJob,
            errors.InvalidJob,
            "priority",
            "job 1: priority must be a whole number, got 1.5",
        ),
        (
            b'{"jobs": [{"target": "m:f", "labels": "gpu"}]}',
            WorkflowRequest,
            errors.InvalidJob,
            errors.InvalidJob,
            "labels",
            'job 0: labels must be an array, got "gpu"',
        ),
        (
            b'{"older_than": 0}',
            bodies.PruneRequest,
            SETTING,
            SETTING,
            "older_than",
            "older_than must be a number > 0.0, got 0",
        ),
        (
            b'{"max_running": "four"}',
            bodies.QueuePatch,
            SETTING,
            SETTING,
            "max_running",
            'max_running must be a whole number or null, got "four"',
        ),
        (
            b'{"paused": "yes"}',
            bodies.SchedulePatch,
            SETTING,
            SETTING,
            "paused",
            'paused must be true or false, got "yes"',
        ),
        (
            b'{"name": "n", "every_seconds": "1h", "job": {"target": "m:f"}}',
            bodies.ScheduleRequest,
            SETTING,
            SETTING,
            "every_seconds",
            'every_seconds must be a number or null, got "1h"',
        ),
        (
            b'{"name": "n", "every_seconds": 60, "job": {"target": "m:f", "timeout": "5x"}}',
            bodies.ScheduleRequest,
            SETTING,
            errors.InvalidJob,
            "timeout",
            'job.timeout must be a number or null, got "5x"',
        ),
        (
            b'{"name": "n", "every_seconds": 60, "job": {"target": "m:f", "colour": 1}}',
            bodies.ScheduleRequest,
            SETTING,
            errors.InvalidJob,
            "colour",
            "unknown field job.colour; known: after, args, delay, idempotency_key, kwargs, "
            "labels, limits, max_attempts, priority, queue, retry, run_anyway, run_at, target, "
            "timeout, unchecked",
        ),
        (
            b'{"older_than": 60, "colour": 1}',
            bodies.PruneRequest,
            SETTING,
            SETTING,
            "colour",
            "unknown field colour; known: older_than",
        ),
    ],
)
def test_a_refused_body_names_its_member_in_words(
    body: bytes,
    into: Any,
    refused: type[errors.InvalidJob] | type[errors.InvalidSetting],
    kind: type[errors.TaskqError],
    field: str,
    message: str,
) -> None:
    with pytest.raises(errors.TaskqError) as caught:
        bodies.decoded(body, into, refused=refused)
    assert (type(caught.value), caught.value.field, str(caught.value)) == (kind, field, message)


def test_a_long_value_is_shown_cut_short() -> None:
    with pytest.raises(errors.InvalidJob) as caught:
        bodies.decoded(b'{"target": "m:f", "timeout": "' + b"x" * 500 + b'"}', JOBS)
    assert str(caught.value) == 'timeout must be a number or null, got "' + "x" * 56 + "..."


def test_a_whole_float_is_still_taken_for_an_integer() -> None:
    assert bodies.decoded(b'{"target": "m:f", "priority": 2.0}', JOBS).priority == 2
