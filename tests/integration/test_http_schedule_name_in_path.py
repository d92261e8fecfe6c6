"""``PATCH`` and ``DELETE /schedules/{name}`` state the bounds of a schedule's name.

``POST /schedules`` holds a name to 1 to 100 letters, digits, ``_``, ``.``,
``:`` or ``-`` (starting with a letter or digit), so no schedule has another:
the OpenAPI document states that bound for the name in the path, and a name
outside it names no schedule, a 404 ``ScheduleNotFound`` as the document
lists, that changes nothing. A name within it is paused and removed.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest

from taskq.broker import schedule_timing

NAME = "nightly.backup:v1-2_b"


def _operation(api: httpx.Client, method: str) -> dict[str, Any]:
    operation: dict[str, Any] = api.get("/openapi.json").json()["paths"]["/schedules/{name}"][
        method
    ]
    return operation


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_the_document_states_the_bound_post_holds_a_name_to(api: httpx.Client, method: str) -> None:
    operation = _operation(api, method)
    [name] = [param for param in operation["parameters"] if param["in"] == "path"]
    assert name["schema"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 100,
        "pattern": schedule_timing.NAME.pattern,
    }
    assert "404" in operation["responses"]


def _names(api: httpx.Client) -> list[str]:
    return [schedule["name"] for schedule in api.get("/schedules").json()["schedules"]]


@pytest.mark.parametrize(
    "name", ["a b", "-leading", "x" * 101, "caf\N{LATIN SMALL LETTER E WITH ACUTE}"]
)
def test_a_name_outside_it_names_no_schedule(api: httpx.Client, name: str) -> None:
    assert not schedule_timing.NAME.admits(name)
    before = _names(api)
    path = f"/schedules/{quote(name, safe='')}"
    for answer in (api.patch(path, json={"paused": True}), api.delete(path)):
        assert (answer.status_code, answer.headers["content-type"]) == (
            404,
            "application/problem+json",
        ), answer.text
        assert answer.json()["type"] == "urn:taskq:problem:ScheduleNotFound"
        assert answer.json()["detail"] == f"no schedule named {name!r}"
    assert _names(api) == before


def test_a_name_within_it_is_paused_and_removed(api: httpx.Client) -> None:
    assert schedule_timing.NAME.admits(NAME)
    job = {"target": "tests.support.jobs:echo", "args": [1], "unchecked": True}
    added = api.post("/schedules", json={"name": NAME, "every_seconds": 3600, "job": job})
    assert added.status_code == 201, added.text
    path = f"/schedules/{quote(NAME, safe='')}"
    paused = api.patch(path, json={"paused": True})
    assert (paused.status_code, paused.json()["paused"]) == (200, True), paused.text
    assert api.delete(path).status_code == 204
    assert NAME not in _names(api)
