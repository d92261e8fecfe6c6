"""How ``taskq serve`` runs uvicorn: what it checks first, and what a request costs on top."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from taskq import errors
from taskq.config import ServerSection, TokenSection
from taskq.dev.certificates import TlsFiles, find_openssl, make_test_certificates
from taskq.dev.processes import free_ports
from taskq.server import run


def _uvicorn_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **server: Any
) -> dict[str, Any]:
    """What ``serve`` configures uvicorn with (not run) for a ``[server]`` of ``server``."""
    ran: dict[str, Any] = {}
    monkeypatch.setattr(run, "run_uvicorn", lambda config, stopping: ran.update(vars(config)))
    tokens = [TokenSection(name="ops", scopes=["admin"], token="ops-token")]
    [port] = free_ports(1)
    settings = ServerSection(**{"listen": f"127.0.0.1:{port}", "tokens": tokens, **server})
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


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_test_certificates(tmp_path_factory.mktemp("tls"))


def _refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **server: Any) -> str:
    """What ``serve`` refuses ``[server]`` ``server`` with: uvicorn not run, no store made."""
    with pytest.raises(errors.ConfigError) as refused:
        _uvicorn_settings(tmp_path, monkeypatch, **server)
    assert not (tmp_path / "taskq.db").exists()
    return str(refused.value)


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_a_port_out_of_range_is_refused_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    message = _refusal(tmp_path, monkeypatch, listen=f"127.0.0.1:{port}")
    assert message == f"listen address '127.0.0.1:{port}': the port must be 1 to 65535"


def test_a_missing_tls_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: TlsFiles
) -> None:
    missing = str(tmp_path / "nowhere.pem")
    assert _refusal(tmp_path, monkeypatch, tls_cert=missing, tls_key=str(tls.key)) == (
        f"TLS certificate {missing}: cannot read it: No such file or directory"
    )
    assert _refusal(tmp_path, monkeypatch, tls_cert=str(tls.cert), tls_key=missing) == (
        f"TLS key {missing}: cannot read it: No such file or directory"
    )


def test_a_tls_file_that_is_not_pem_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: TlsFiles
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    assert _refusal(tmp_path, monkeypatch, tls_cert=str(junk), tls_key=str(tls.key)) == (
        f"TLS certificate {junk} holds no PEM certificate"
    )
    assert _refusal(tmp_path, monkeypatch, tls_cert=str(tls.cert), tls_key=str(junk)) == (
        f"TLS key {junk} holds no PEM private key"
    )
    # The two swapped: the key file holds no certificate.
    assert _refusal(tmp_path, monkeypatch, tls_cert=str(tls.key), tls_key=str(tls.cert)) == (
        f"TLS certificate {tls.key} holds no PEM certificate"
    )


def test_a_key_of_another_certificate_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: TlsFiles
) -> None:
    other_key = tls.ca.with_name("ca.key")  # the CA's, made beside it
    assert _refusal(tmp_path, monkeypatch, tls_cert=str(tls.cert), tls_key=str(other_key)) == (
        f"TLS key {other_key} is not the key of the certificate {tls.cert}"
    )


def test_an_encrypted_key_is_refused_without_a_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: TlsFiles
) -> None:
    encrypted = tmp_path / "encrypted.key"
    subprocess.run(
        [
            *(find_openssl(), "pkey", "-in", str(tls.key), "-out", str(encrypted)),
            *("-aes256", "-passout", "pass:secret"),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    assert _refusal(tmp_path, monkeypatch, tls_cert=str(tls.cert), tls_key=str(encrypted)) == (
        f"TLS key {encrypted} is encrypted: taskq serve needs a key without a passphrase"
    )


def test_good_tls_files_reach_uvicorn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: TlsFiles
) -> None:
    ran = _uvicorn_settings(tmp_path, monkeypatch, tls_cert=str(tls.cert), tls_key=str(tls.key))
    assert (ran["ssl_certfile"], ran["ssl_keyfile"]) == (str(tls.cert), str(tls.key))


def test_an_address_in_use_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = _refusal(tmp_path, monkeypatch, listen=f"127.0.0.1:{port}")
    assert message == f"cannot listen on 127.0.0.1:{port}: Address already in use"


def test_serve_says_at_start_which_store_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _uvicorn_settings(tmp_path, monkeypatch)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"taskq serve: store sqlite://{tmp_path / 'taskq.db'}, listening on ")


def test_the_start_line_masks_the_store_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "run_uvicorn", lambda config, stopping: None)
    # Not migrated: nothing is asked of the cluster, which is not there.
    monkeypatch.setattr(run, "open_store", partial(run.open_store, migrate=False))
    [port] = free_ports(1)
    run.serve("rqlite://ana:s3cret@127.0.0.1:4001", ServerSection(listen=f"127.0.0.1:{port}"))
    said = capsys.readouterr().err
    assert "store rqlite://ana:***@127.0.0.1:4001," in said
    assert "s3cret" not in said


def test_the_server_tells_the_app_as_it_starts_to_stop() -> None:
    [port] = free_ports(1)
    config = uvicorn.Config(Starlette(), host="127.0.0.1", port=port, log_level="warning")
    stopping = asyncio.Event()
    server = run.StoppingServer(config, stopping)

    async def serve_then_stop() -> bool:
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        told_before = stopping.is_set()
        server.should_exit = True  # what uvicorn's SIGTERM handler does
        await asyncio.wait_for(serving, timeout=60)
        return told_before

    assert asyncio.run(serve_then_stop()) is False
    assert stopping.is_set()
