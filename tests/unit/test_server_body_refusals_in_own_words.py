"""Every body the API refuses is told in its own words, never msgspec's with a JSON path.

A client in another language reads the ``detail`` of a problem: an unknown
member of ``POST /jobs`` (or of a schedule's job, a cancel's ids, a
setting) is named with the member it most likely stands for, a missing one
is said to be required and named in ``field``, and a body of the wrong JSON
kind says what was expected, as ``POST /workflows`` already did.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskq import errors
from taskq.server import bodies, jobs

SETTING = errors.InvalidSetting


@pytest.mark.parametrize(
    ("body", "into", "field", "detail"),
    [
        (
            b'{"target": "m:f", "queeue": "images"}',
            jobs._JOBS,
            "queeue",
            "unknown field queeue; did you mean queue?",
        ),
        (
            b'[{"target": "m:f"}, {"target": "m:f", "queeue": "images"}]',
            jobs._JOBS,
            "queeue",
            "job 1: unknown field queeue; did you mean queue?",
        ),
        (b'[{"target": "m:f"}, {"args": [1]}]', jobs._JOBS, "target", "job 1: target is required"),
        (b'{"args": [1]}', jobs._JOBS, "target", "target is required"),
        (b"{}", jobs.JobIds, "ids", "ids is required"),
        (b'{"idz": [1]}', jobs.JobIds, "idz", "unknown field idz; did you mean ids?"),
        (b"[1, 2]", jobs.JobIds, None, "the body must be a JSON object; got an array"),
        (
            b'{"name": "n", "every_seconds": 60, "job": {"target": "m:f", "queeue": "x"}}',
            bodies.ScheduleRequest,
            "queeue",
            "unknown field job.queeue; did you mean job.queue?",
        ),
        (
            b'{"name": "n", "every_seconds": 60, "job": {"args": []}}',
            bodies.ScheduleRequest,
            "target",
            "job.target is required",
        ),
    ],
)
def test_a_refused_job_body_is_told_in_the_apis_words(
    body: bytes, into: Any, field: str | None, detail: str
) -> None:
    # A schedule's own members are settings; its job's, as every job's, are not.
    refused_as = SETTING if into is bodies.ScheduleRequest else errors.InvalidJob
    with pytest.raises(errors.InvalidJob) as refused:
        bodies.decoded(body, into, refused=refused_as)
    assert (refused.value.field, str(refused.value)) == (field, detail)


@pytest.mark.parametrize(
    ("body", "into", "field", "detail"),
    [
        (
            b'{"older_than": 60, "colour": 1}',
            bodies.PruneRequest,
            "colour",
            "unknown field colour; known: older_than",
        ),
        (b'{"rate": 5}', bodies.SubmitLimitRequest, "period", "period is required"),
        (b'"60"', bodies.PruneRequest, None, "the body must be a JSON object; got a string"),
    ],
)
def test_a_refused_setting_body_is_told_in_the_apis_words(
    body: bytes, into: Any, field: str | None, detail: str
) -> None:
    with pytest.raises(SETTING) as refused:
        bodies.decoded(body, into, refused=SETTING)
    assert (type(refused.value), refused.value.field, str(refused.value)) == (
        SETTING,
        field,
        detail,
    )


def test_a_body_that_is_not_json_says_to_send_json_whatever_its_content_type() -> None:
    # curl -d sends a form's Content-Type; a form body is the likely mistake.
    with pytest.raises(errors.BadRequest) as refused:
        bodies.decoded(b"target=m:f&args=1", jobs._JOBS)
    assert str(refused.value) == (
        "the body is not JSON (JSON is malformed: invalid character (byte 4)); "
        "send a JSON object or array, whatever the Content-Type"
    )
