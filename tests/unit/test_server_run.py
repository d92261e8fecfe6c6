"""How ``taskq serve`` runs uvicorn: what a request costs the server besides its own work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from taskq.config import ServerSection, TokenSection
from taskq.server import run


def _uvicorn_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **server: Any
) -> dict[str, Any]:
    """What ``serve`` hands ``uvicorn.run``, which is not run, for a ``[server]`` of ``server``."""
    ran: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **settings: ran.update(settings))
    tokens = [TokenSection(name="ops", scopes=["admin"], token="ops-token")]
    settings = ServerSection(listen="127.0.0.1:0", tokens=tokens, **server)
    run.serve(f"sqlite://{tmp_path / 'taskq.db'}", settings)
    return ran


def test_uvicorn_parses_http_with_httptools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uvicorn's choice: httptools, which the server extra installs, over h11.
    assert _uvicorn_settings(tmp_path, monkeypatch).get("http", "auto") == "auto"
    assert AutoHTTPProtocol.__name__ == "HttpToolsProtocol", (
        "uvicorn parses HTTP with h11: httptools is missing (pip install '.[server]')"
    )


def test_serve_writes_no_line_per_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _uvicorn_settings(tmp_path, monkeypatch)["access_log"] is False


def test_access_log_setting_turns_the_lines_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _uvicorn_settings(tmp_path, monkeypatch, access_log=True)["access_log"] is True
