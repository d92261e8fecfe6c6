"""docs/http-api.md lists every endpoint of ``taskq serve``, as its routes declare them."""

from __future__ import annotations

import re
from pathlib import Path

from taskq.server.app import ENDPOINTS

_DOC = Path(__file__).parents[2] / "docs" / "http-api.md"


def test_every_endpoint_has_a_row_in_the_endpoints_table() -> None:
    table = _DOC.read_text().split("## Endpoints", 1)[1].split("\n## ", 1)[0]
    rows = {
        match[1] for match in re.finditer(r"^\| `([A-Z]+ /[^`?]*)[`?]", table, flags=re.MULTILINE)
    }
    # The doc names an id parameter {id} where the route names it {job_id}.
    declared = {
        re.sub(r"\{[a-z]+_id\}", "{id}", f"{endpoint.method} {endpoint.path}")
        for endpoint in ENDPOINTS
    }
    assert declared <= rows, sorted(declared - rows)
