"""The parameters an endpoint reads beside its body (the query's, a header), as OpenAPI has them.

Declared with the endpoint (:attr:`taskq.server.endpoint.Endpoint.params`), so
that a client generated from ``/openapi.json`` can send them: a filter, a page,
a long poll's wait that the document did not name could not be sent at all.
Each schema states the very bounds the handler checks (``taskq.server.bodies``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from starlette.requests import Request

from taskq import errors
from taskq.broker import job_validation
from taskq.server import bodies

# The longest Idempotency-Key header: a batch's job i is keyed KEY:i, and i has at most 7
# digits in a body of MAX_BODY_BYTES, so that every job's key is a name the store takes;
# one bound for every body, so that the OpenAPI document can state it.
MAX_HEADER_KEY_CHARS = job_validation.MAX_NAME_CHARS - len(":") - 7


class Param(NamedTuple):
    """One parameter: its ``name``, its JSON ``schema``, what it does, and where it is sent."""

    name: str
    schema: Mapping[str, Any]
    description: str
    where: str = "query"

    def openapi(self) -> dict[str, Any]:
        """The parameter as an OpenAPI operation lists it: never required."""
        return {
            "name": self.name,
            "in": self.where,
            "required": False,
            "description": self.description,
            "schema": dict(self.schema),
        }


def whole(low: int, high: int) -> dict[str, Any]:
    """The schema of a whole number from ``low`` to ``high``."""
    return {"type": "integer", "minimum": low, "maximum": high}


def seconds(high: float) -> dict[str, Any]:
    """The schema of a number of seconds from 0 to ``high``."""
    return {"type": "number", "minimum": 0, "maximum": high}


def one_of(values: Iterable[str]) -> dict[str, Any]:
    """The schema of a text that is one of ``values``."""
    return {"type": "string", "enum": list(values)}


TEXT = {"type": "string"}
ID = whole(1, bodies.MAX_ID)

PAGE = (
    Param(
        "limit",
        whole(1, bodies.MAX_PAGE),
        f"at most this many, newest first ({bodies.DEFAULT_PAGE} by default)",
    ),
    Param("before", ID, "only those older than this id: the last one of the page before"),
)
"""A keyset page (:func:`taskq.server.bodies.keyset`); the answer's ``next`` gives both."""

IDEMPOTENCY_KEY = Param(
    "Idempotency-Key",
    # Empty is no key at all.
    {
        "type": "string",
        "maxLength": MAX_HEADER_KEY_CHARS,
        "pattern": job_validation.NAME.pattern,
    },
    "names the request: sent again with the same body, it answers the same; with another "
    "body, a 409 (a batch's job i is keyed KEY:i); a key in the body too must be the same",
    where="header",
)


def header_key(request: Request) -> str | None:
    """The ``Idempotency-Key`` header (None: none, or empty), refused (InvalidJob) past
    :data:`MAX_HEADER_KEY_CHARS`."""
    header = request.headers.get("idempotency-key") or None
    if header is not None and len(header) > MAX_HEADER_KEY_CHARS:
        raise errors.InvalidJob(
            f"the Idempotency-Key header is {len(header)} characters long, over "
            f"{MAX_HEADER_KEY_CHARS} (a batch's job i is keyed KEY:i); send a shorter key",
            field="idempotency_key",
        )
    return header


def one_key(request: Request, sent: str | None) -> str | None:
    """The request's idempotency key: the ``Idempotency-Key`` header's or the body's member
    ``sent``; both given, they must be the same (InvalidJob), since either would silently
    name the request that a resend under the other would not find."""
    header = header_key(request)
    if header is not None and sent is not None and header != sent:
        raise errors.InvalidJob(
            f"two idempotency keys: {header!r} in the Idempotency-Key header and {sent!r} "
            "in the body; send one of them, or the same in both",
            field="idempotency_key",
        )
    return sent or header
