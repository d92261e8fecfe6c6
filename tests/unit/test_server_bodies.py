"""A request body the server refuses: the error class that fits it, and the member at fault.

A job's member is refused as InvalidJob, a setting's (a queue's limit, a
schedule's timing, a prune's age) as InvalidSetting.
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
            "Expected `float | null`, got `str` - at `$.timeout`",
        ),
        (
            b'[{"target": "m:f"}, {"target": "m:f", "priority": 1.5}]',
            JOBS,
            errors.InvalidJob,
            errors.InvalidJob,
            "priority",
            "Expected `int`, got `float` - at `$[1].priority`",
        ),
        (
            b'{"jobs": [{"target": "m:f", "labels": "gpu"}]}',
            WorkflowRequest,
            errors.InvalidJob,
            errors.InvalidJob,
            "labels",
            "Expected `array`, got `str` - at `$.jobs[0].labels`",
        ),
        (
            b'{"older_than": 0}',
            bodies.PruneRequest,
            SETTING,
            SETTING,
            "older_than",
            "Expected `float` > 0.0 - at `$.older_than`",
        ),
        (
            b'{"max_running": "four"}',
            bodies.QueuePatch,
            SETTING,
            SETTING,
            "max_running",
            "Expected `int | null`, got `str` - at `$.max_running`",
        ),
        (
            b'{"paused": "yes"}',
            bodies.SchedulePatch,
            SETTING,
            SETTING,
            "paused",
            "Expected `bool`, got `str` - at `$.paused`",
        ),
        (
            b'{"name": "n", "every_seconds": "1h", "job": {"target": "m:f"}}',
            bodies.ScheduleRequest,
            SETTING,
            SETTING,
            "every_seconds",
            "Expected `float | null`, got `str` - at `$.every_seconds`",
        ),
        (
            b'{"name": "n", "every_seconds": 60, "job": {"target": "m:f", "timeout": "5x"}}',
            bodies.ScheduleRequest,
            SETTING,
            errors.InvalidJob,
            "timeout",
            "Expected `float | null`, got `str` - at `$.job.timeout`",
        ),
        (
            b'{"name": "n", "every_seconds": 60, "job": {"target": "m:f", "colour": 1}}',
            bodies.ScheduleRequest,
            SETTING,
            errors.InvalidJob,
            "colour",
            "Object contains unknown field `colour` - at `$.job`",
        ),
        (
            b'{"older_than": 60, "colour": 1}',
            bodies.PruneRequest,
            SETTING,
            SETTING,
            "colour",
            "Object contains unknown field `colour`",
        ),
    ],
)
def test_a_refused_body_names_its_member(
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


def test_a_whole_float_is_still_taken_for_an_integer() -> None:
    assert bodies.decoded(b'{"target": "m:f", "priority": 2.0}', JOBS).priority == 2
