"""Each operation of ``/openapi.json`` has a name, and lists only the refusals it can meet.

A generator names a client's functions by ``operationId`` (one it lacks, each
generator makes up its own way); an operation that asks no token is never
refused for one (401, 403), and one with no body never for its size (413); an
answer in text (``/metrics``) says its media type.
"""

from __future__ import annotations

from typing import Any

import httpx

from taskq.dev.server import ServerProcess


def _operations(served: tuple[str, ServerProcess]) -> dict[tuple[str, str], Any]:
    document = httpx.get(f"{served[1].url}/openapi.json", timeout=30).json()
    return {
        (method.upper(), path): operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }


def test_every_operation_has_a_name_of_its_own(served: tuple[str, ServerProcess]) -> None:
    operations = _operations(served)
    names = [operation["operationId"] for operation in operations.values()]
    assert len(names) == len(set(names)) == len(operations)
    assert operations[("GET", "/jobs/{job_id}/result")]["operationId"] == ("get_jobs_job_id_result")


def test_an_operation_lists_only_the_refusals_it_can_meet(
    served: tuple[str, ServerProcess],
) -> None:
    operations = _operations(served)
    for (method, path), operation in operations.items():
        statuses = set(operation["responses"])
        assert ("401" in statuses) == ("security" in operation), (method, path)
        assert ("413" in statuses) == ("requestBody" in operation), (method, path)
    assert {"401", "403"} & set(operations[("GET", "/healthz")]["responses"]) == set()
    assert "413" in operations[("POST", "/jobs")]["responses"]


def test_a_text_answer_is_declared_with_its_media_type(served: tuple[str, ServerProcess]) -> None:
    # A generator decodes an answer by its declared media type; /metrics declared none.
    answer = _operations(served)[("GET", "/metrics")]["responses"]["200"]
    assert answer["content"] == {"text/plain": {"schema": {"type": "string"}}}
