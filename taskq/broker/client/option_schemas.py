"""The JSON schemas of a job's ``limits`` and ``retry``, from the declarations they are checked by.

A job's limits are :data:`taskq.broker.limits.FORMS` (each limit's name and
how it is written) within :data:`taskq.broker.job_validation.LIMITS`; a retry
policy is :class:`taskq.retry.RetryPolicy`'s fields within
:data:`taskq.retry.POLICY_BOUNDS`, its exception names
:data:`taskq.retry.EXCEPTION_NAME`. The schemas admit exactly what those
checks admit (a unit test holds them to it), so a request the OpenAPI
document calls valid is not refused for its limits or its policy.
"""

from __future__ import annotations

from typing import Any

import msgspec

from taskq import retry
from taskq.bounds import Bounds, Text
from taskq.broker import job_validation
from taskq.broker.limits import FORMS, UNITS, Form, size_pattern


def limits_schema() -> dict[str, Any]:
    """The object of a job's limits: the known names only, each within its bounds."""
    return {
        "type": "object",
        "properties": {
            name: _limit(form, job_validation.LIMITS[name]) for name, form in FORMS.items()
        },
        "additionalProperties": False,
    }


def _limit(form: Form, bounds: Bounds) -> dict[str, Any]:
    if form is Form.WHOLE:
        return {"type": "integer", **bounds.keywords()}
    if form is Form.SECONDS:
        return {"type": "number", **bounds.keywords()}
    assert bounds.high is not None, "every limit has a ceiling"
    units = ", ".join(UNITS)
    return {
        "anyOf": [
            {"type": "integer", **bounds.keywords()},
            {"type": "string", **Text(pattern=size_pattern(int(bounds.high))).keywords()},
        ],
        "description": f"bytes: a number, or text with a binary unit ({units}, in any letter "
        f'case), e.g. "512MiB"; from 1 to {int(bounds.high)} bytes either way',
    }


def retry_schema() -> dict[str, Any]:
    """The object of a retry policy: RetryPolicy's fields only, each within its bounds."""
    name = {"type": "string", **retry.EXCEPTION_NAME.keywords()}
    names = {
        "anyOf": [name, {"type": "array", "items": name}],
        "description": "exception classes by qualified name (one alone, or a list)",
    }
    properties: dict[str, Any] = {}
    for field in msgspec.structs.fields(retry.RetryPolicy):
        bounds = retry.POLICY_BOUNDS.get(field.name)
        properties[field.name] = (
            names if bounds is None else {"type": "number", **bounds.keywords()}
        )
    return {"type": "object", "properties": properties, "additionalProperties": False}
