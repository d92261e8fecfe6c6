"""The OpenAPI document, built from the endpoints' declarations and msgspec's JSON schemas."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from taskq import __version__
from taskq.bounds import Text
from taskq.server.endpoint import Endpoint
from taskq.server.problems import Problem

_PARAMETER = re.compile(r"\{([a-z_]+)\}")
_ERRORS = {
    "400": "Malformed request (JSON, query parameter, job id in the path)",
    "401": "No valid bearer token",
    "403": "The token lacks the scope",
    "404": "No such job, attempt, workflow, queue, schedule or worker",
    "409": "Idempotency conflict (the key already names a job, `job_id`, or a workflow, "
    "`workflow_id`), or the job or workflow is in the wrong state",
    "413": "The body is too large",
    "422": "Refused job or setting (the member is named in `field`)",
    "429": "Over the submitter's rate limit (see Retry-After)",
    "503": "The store does not answer (see Retry-After)",
}
_TOKEN_REFUSALS = {"401", "403"}
# What only a body can bring on: one too large.
_BODY_REFUSALS = {"413"}
# A followed answer: events, each with its type, id and data (a JSON document).
_EVENTS = {
    "text/event-stream": {
        "schema": {
            "type": "string",
            "description": "Server-Sent Events: `event:` the type, `id:` ATTEMPT:END (or "
            "ATTEMPT.RUN:END for a run of the attempt after its first, as hand-backs make), "
            "`data:` the piece as JSON; the last is attempt_ended with the job's end",
        }
    }
}


def document(endpoints: Sequence[Endpoint], *, bearer: bool = True) -> dict[str, Any]:
    """OpenAPI 3.1 for ``endpoints``: every body, answer and problem as a JSON schema.

    ``bearer``: whether the server asks for tokens; an open one (no token
    configured, on a loopback address) takes every request without one, and
    never answers 401 or 403.
    """
    refusals = {
        status: text for status, text in _ERRORS.items() if bearer or status not in _TOKEN_REFUSALS
    }
    types = [Problem]
    for endpoint in endpoints:
        types += [kind for kind in (endpoint.body, endpoint.answer) if kind is not None]
    schemas, components = msgspec.json.schema_components(
        types, ref_template="#/components/schemas/{name}"
    )
    by_type = dict(zip(types, schemas, strict=True))
    problem = {"application/problem+json": {"schema": by_type[Problem]}}
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        content = (
            {"content": {"application/json": {"schema": by_type[endpoint.answer]}}}
            if endpoint.answer is not None
            else {}
        )
        if endpoint.stream:
            content["content"] = {**content.get("content", {}), **_EVENTS}
        if endpoint.text:
            # The media type without its parameters: a generator keys its decoders by it.
            media = endpoint.text.partition(";")[0]
            content["content"] = {media: {"schema": {"type": "string"}}}
        answers = [(endpoint.status, endpoint.summary), *endpoint.also]
        named = dict(endpoint.named)
        operation: dict[str, Any] = {
            "operationId": operation_id(endpoint),
            "summary": endpoint.summary,
            "parameters": [
                {
                    "name": name,
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", **named.get(name, Text()).keywords()},
                }
                for name in _PARAMETER.findall(endpoint.path)
            ]
            + [param.openapi() for param in endpoint.params],
            "responses": {
                **{str(status): {"description": text, **content} for status, text in answers},
                **{
                    status: {"description": text, "content": problem}
                    for status, text in refusals.items()
                    # No token asked, none refused; no body, none too large.
                    if (endpoint.scope is not None or status not in _TOKEN_REFUSALS)
                    and (endpoint.body is not None or status not in _BODY_REFUSALS)
                },
            },
        }
        if endpoint.scope is not None and bearer:
            operation["security"] = [{"bearer": [endpoint.scope]}]
        if endpoint.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": by_type[endpoint.body]}},
            }
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation
    security = {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "taskq", "version": __version__},
        "paths": paths,
        "components": {"schemas": components, **(security if bearer else {})},
    }


def operation_id(endpoint: Endpoint) -> str:
    """A name for the operation, unique as its method and path are (``get_jobs_job_id_result``):
    what a client generated from the document names its function, where it would otherwise
    make one up, each generator its own way."""
    words = re.findall(r"[a-z0-9]+", endpoint.path.lower())
    return "_".join([endpoint.method.lower(), *words])
