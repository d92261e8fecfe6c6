"""How ``taskq serve`` runs uvicorn: what a request costs the server besides its own work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn

from taskq.config import ServerSection, TokenSection
from taskq.server import run


def test_serve_writes_no_line_per_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **settings: ran.update(settings))
    tokens = [TokenSection(name="ops", scopes=["admin"], token="ops-token")]
    settings = ServerSection(listen="127.0.0.1:0", tokens=tokens)
    run.serve(f"sqlite://{tmp_path / 'taskq.db'}", settings)
    assert ran["access_log"] is False
