"""A whole number past any the store holds, in the query, is a 400 naming it, not a 500.

``GET /jobs/{id}/output?offset=`` took any whole number, and one past SQLite's
INTEGER failed in the store (an OverflowError, answered as a bare 500): it is
held to the bound the OpenAPI document states for it, as ``before`` and
``workflow`` are.
"""

from __future__ import annotations

import httpx

from taskq.dev.server import ServerProcess, token_of
from taskq.server.bodies import MAX_ID


def test_an_output_offset_past_any_store_is_a_bad_request(
    served: tuple[str, ServerProcess],
) -> None:
    headers = {"Authorization": f"Bearer {token_of('tester')}"}
    with httpx.Client(base_url=served[1].url, headers=headers, timeout=30) as api:
        job = {"target": "m:f", "queue": "never-claimed", "unchecked": True}
        job_id = api.post("/jobs", json=job).json()["id"]
        refused = api.get(f"/jobs/{job_id}/output", params={"offset": MAX_ID + 1})
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["detail"] == (
            f"query parameter offset must be >= 0 and <= {MAX_ID}, got {MAX_ID + 1}"
        )
        assert api.get(f"/jobs/{job_id}/output", params={"offset": MAX_ID}).status_code == 200
