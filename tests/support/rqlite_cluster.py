"""A real rqlite cluster on loopback for tests: started here, stopped by pid.

Nothing here imitates rqlite: it runs the ``rqlited`` binary that
``scripts/install_rqlite.sh`` provides (found through ``TASKQ_RQLITED``).
A cluster can serve its HTTP API over HTTPS with a throwaway CA and server
certificate made by :func:`make_test_certificates` (the ``openssl`` CLI).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    "rqlited is missing: run scripts/install_rqlite.sh (it builds rqlited into the "
    "cache and prints its path), or set TASKQ_RQLITED to an rqlited binary"
)


class RqlitedMissing(RuntimeError):
    """Raised (never skipped) when a test needs rqlited and none is installed."""


def find_rqlited() -> str:
    """The rqlited binary to test against, or a loud failure naming the installer."""
    configured = os.environ.get("TASKQ_RQLITED")
    if configured and os.access(configured, os.X_OK):
        return configured
    try:
        out = (
            subprocess.run(
                [str(REPO / "scripts" / "install_rqlite.sh")],
                check=True,
                capture_output=True,
                text=True,
                timeout=900,
            )
            .stdout.strip()
            .splitlines()
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise RqlitedMissing(f"{INSTALL_HINT}\n{str(detail).strip()[-2000:]}") from exc
    if out and os.access(out[-1], os.X_OK):
        return out[-1]
    raise RqlitedMissing(INSTALL_HINT)


class TlsSetupFailed(RuntimeError):
    """Raised when the throwaway CA or server certificate cannot be made."""


@dataclass(frozen=True)
class TlsFiles:
    """A server certificate and key for rqlited's HTTPS API, and the CA that signed it."""

    cert: Path
    key: Path
    ca: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts only the test CA (hostnames still checked)."""
        return ssl.create_default_context(cafile=str(self.ca))


_OPENSSL_TIMEOUT = 30.0
_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
prompt = no

[dn]
CN = unused

[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[v3_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = {san}
"""


def find_openssl() -> str:
    found = shutil.which("openssl") or "/usr/bin/openssl"
    if not os.access(found, os.X_OK):
        raise TlsSetupFailed("the openssl CLI is missing (looked on PATH and at /usr/bin/openssl)")
    return found


def _openssl(args: list[str], cwd: Path) -> None:
    command = [find_openssl(), *args]
    try:
        subprocess.run(
            command, cwd=cwd, check=True, capture_output=True, text=True, timeout=_OPENSSL_TIMEOUT
        )
    except subprocess.CalledProcessError as exc:
        raise TlsSetupFailed(
            f"openssl failed (exit {exc.returncode}): {' '.join(command)}\n"
            f"{(exc.stderr or exc.stdout or '').strip()[-2000:]}"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise TlsSetupFailed(
            f"openssl took over {_OPENSSL_TIMEOUT:g}s: {' '.join(command)}"
        ) from exc
    except OSError as exc:
        raise TlsSetupFailed(f"openssl could not run: {' '.join(command)}: {exc}") from exc


def _subject_alt_names(hosts: Sequence[str]) -> str:
    names = []
    for host in hosts:
        try:
            ip_address(host)
        except ValueError:
            names.append(f"DNS:{host}")
        else:
            names.append(f"IP:{host}")
    return ", ".join(names)


def make_test_certificates(
    directory: Path, hosts: Sequence[str] = ("127.0.0.1",), *, name: str = "taskq test"
) -> TlsFiles:
    """A fresh CA and a server certificate it signed for ``hosts``, under ``directory``.

    Each host is an IP (an IP SAN) or a DNS name; the keys are P-256 and the
    certificates last two days. Raises :class:`TlsSetupFailed` when openssl fails.
    """
    if not hosts:
        raise ValueError("a server certificate needs at least one host")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "openssl.cnf"
    config.write_text(_OPENSSL_CONFIG.format(san=_subject_alt_names(hosts)))
    key_args = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    files = TlsFiles(
        cert=directory / "server.pem", key=directory / "server.key", ca=directory / "ca.pem"
    )
    ca_key = directory / "ca.key"
    csr = directory / "server.csr"
    # The CA: self-signed.
    _openssl(
        [
            *("req", "-x509", *key_args, "-config", str(config), "-extensions", "v3_ca"),
            *("-subj", f"/CN={name} CA", "-days", "2"),
            *("-keyout", str(ca_key), "-out", str(files.ca)),
        ],
        cwd=directory,
    )
    # The server's key and request, then the CA's signature on it.
    _openssl(
        [
            *("req", "-new", *key_args, "-config", str(config)),
            *("-subj", f"/CN={hosts[0]}", "-keyout", str(files.key), "-out", str(csr)),
        ],
        cwd=directory,
    )
    _openssl(
        [
            *("x509", "-req", "-in", str(csr), "-CA", str(files.ca), "-CAkey", str(ca_key)),
            *("-set_serial", f"0x{secrets.token_hex(8)}", "-days", "2"),
            *("-extfile", str(config), "-extensions", "v3_server", "-out", str(files.cert)),
        ],
        cwd=directory,
    )
    for made in (files.cert, files.key, files.ca):
        if not made.is_file() or made.stat().st_size == 0:
            raise TlsSetupFailed(f"openssl reported success but wrote no {made}")
    return files


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class RqliteNode:
    node_id: str
    http_port: int
    raft_port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    tls: bool = False

    @property
    def http_addr(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def raft_addr(self) -> str:
        return f"127.0.0.1:{self.raft_port}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.http_addr}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class RqliteCluster:
    """N rqlited processes bootstrapping together on free loopback ports.

    With ``tls`` their HTTP API is HTTPS (node-to-node raft traffic stays plain).
    """

    binary: str
    root: Path
    size: int = 3
    extra_args: list[str] = field(default_factory=list)
    credentials: tuple[str, str] | None = None
    tls: TlsFiles | None = None
    nodes: list[RqliteNode] = field(default_factory=list)
    _client_ssl: ssl.SSLContext | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        ports = free_ports(2 * self.size)
        for index in range(self.size):
            node_dir = self.root / f"node{index + 1}"
            node_dir.mkdir(parents=True, exist_ok=True)
            self.nodes.append(
                RqliteNode(
                    node_id=f"node{index + 1}",
                    http_port=ports[2 * index],
                    raft_port=ports[2 * index + 1],
                    data_dir=node_dir / "data",
                    log_path=node_dir / "rqlited.log",
                    tls=self.tls is not None,
                )
            )

    @property
    def url(self) -> str:
        """The store URL naming every node: ``rqlites://`` (no options) when TLS is on."""
        scheme = "rqlites" if self.tls else "rqlite"
        return f"{scheme}://" + ",".join(node.http_addr for node in self.nodes)

    def store_url(self, **options: str) -> str:
        """:attr:`url` with query options, e.g. ``store_url(ca_file=...)``."""
        if not options:
            return self.url
        return f"{self.url}?{urllib.parse.urlencode(options, safe='/')}"

    def start(self, timeout: float = 60.0) -> None:
        for node in self.nodes:
            self.start_node(node)
        self.wait_for_leader(timeout=timeout)

    def start_node(self, node: RqliteNode) -> None:
        # A single node bootstraps alone; a cluster's nodes wait for each other.
        joining: list[str] = []
        if self.size > 1:
            join = ",".join(other.raft_addr for other in self.nodes)
            joining = ["-bootstrap-expect", str(self.size), "-join", join]
            joining += ["-join-interval", "250ms", "-join-attempts", "120"]
        # Shorter raft timeouts than the defaults (1 s) make failover tests quicker.
        timeouts = ["-raft-election-timeout", "500ms", "-raft-heartbeat-timeout", "500ms"]
        https: list[str] = []
        if self.tls is not None:
            https = ["-http-cert", str(self.tls.cert), "-http-key", str(self.tls.key)]
        args = [
            self.binary,
            *("-node-id", node.node_id),
            *("-http-addr", node.http_addr),
            *("-raft-addr", node.raft_addr),
            *joining,
            *timeouts,
            *https,
            *self.extra_args,
            str(node.data_dir),
        ]
        log = node.log_path.open("ab")
        try:
            node.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()

    def kill_node(self, node: RqliteNode, sig: int = signal.SIGKILL) -> None:
        if node.process is None:
            return
        if node.process.poll() is None:
            os.kill(node.process.pid, sig)
            try:
                node.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(node.process.pid, signal.SIGKILL)
                node.process.wait(timeout=15)

    def stop(self) -> None:
        for node in self.nodes:
            self.kill_node(node, signal.SIGTERM)

    def _get(self, node: RqliteNode, path: str) -> urllib.request.Request:
        request = urllib.request.Request(f"{node.base_url}{path}")
        if self.credentials:
            token = base64.b64encode(":".join(self.credentials).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return request

    def _open(self, request: urllib.request.Request) -> http.client.HTTPResponse:
        """``urlopen`` bounded to 2 s, trusting the test CA when the API is HTTPS."""
        if self.tls is not None and self._client_ssl is None:
            self._client_ssl = self.tls.client_context()
        response: http.client.HTTPResponse = urllib.request.urlopen(
            request, timeout=2, context=self._client_ssl
        )
        return response

    def status(self, node: RqliteNode) -> dict[str, object] | None:
        try:
            with self._open(self._get(node, "/status")) as response:
                data: dict[str, object] = json.load(response)
                return data
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def local_rows(self, node: RqliteNode, sql: str) -> list[dict[str, object]] | None:
        """Rows of ``sql`` read from ``node``'s own copy (level none), or None if it fails."""
        query = urllib.parse.urlencode({"q": sql, "level": "none", "associative": ""})
        try:
            with self._open(self._get(node, f"/db/query?{query}")) as response:
                data = json.load(response)
        except (OSError, urllib.error.URLError, ValueError):
            return None
        result = data["results"][0]
        if "error" in result:
            return None
        rows: list[dict[str, object]] = result.get("rows", [])
        return rows

    def leader(self) -> RqliteNode | None:
        """The live node whose own raft state is Leader, if exactly one claims it."""
        leaders = []
        for node in self.nodes:
            if not node.alive:
                continue
            status = self.status(node)
            store = status.get("store", {}) if status else {}
            raft = store.get("raft", {}) if isinstance(store, dict) else {}
            if isinstance(raft, dict) and raft.get("state") == "Leader":
                leaders.append(node)
        return leaders[0] if len(leaders) == 1 else None

    def wait_for_leader(self, timeout: float = 30.0) -> RqliteNode:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader is not None and self._ready(leader):
                return leader
            for node in self.nodes:
                if node.process is not None and node.process.poll() not in (None, 0, -9, -15):
                    raise RuntimeError(f"rqlited {node.node_id} exited:\n{self.log_tail(node)}")
            time.sleep(0.1)
        raise TimeoutError(
            f"no rqlite leader within {timeout}s; logs:\n"
            + "\n".join(self.log_tail(node) for node in self.nodes)
        )

    def _ready(self, node: RqliteNode) -> bool:
        try:
            with self._open(self._get(node, "/readyz")) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, node: RqliteNode, lines: int = 20) -> str:
        try:
            text = node.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"[{node.node_id}: no log]"
        return f"[{node.node_id}]\n" + "\n".join(text)


@contextmanager
def running_cluster(
    root: Path,
    size: int = 3,
    extra_args: list[str] | None = None,
    credentials: tuple[str, str] | None = None,
    tls: TlsFiles | None = None,
) -> Iterator[RqliteCluster]:
    """Start a cluster and stop every one of its processes on exit, even on failure.

    With ``tls`` (see :func:`make_test_certificates`) the nodes serve HTTPS.
    """
    cluster = RqliteCluster(
        binary=find_rqlited(),
        root=root,
        size=size,
        extra_args=extra_args or [],
        credentials=credentials,
        tls=tls,
    )
    try:
        cluster.start()
        yield cluster
    finally:
        for node in cluster.nodes:
            cluster.kill_node(node, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
