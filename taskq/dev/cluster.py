"""A real rqlite cluster on loopback: ``rqlited`` processes started here and stopped by pid.

Nothing here imitates rqlite: it runs the ``rqlited`` binary. Each node
keeps its data, log and what identifies it in a directory of its own under
the cluster's root (``node<i>/{data/,rqlited.log,pid,http,raft,cmdline}``,
plus ``url``), so another command can find the cluster, read its state and
stop it (:meth:`RqliteCluster.recorded`). With :class:`TlsFiles` the nodes
serve their HTTP API over HTTPS (node-to-node raft traffic stays plain).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from taskq.dev.certificates import TlsFiles
from taskq.dev.processes import (
    HOST,
    free_ports,
    process_gone,
    read_pid,
    runs_with,
    wait_until,
)
from taskq.dev.rqlited import find_rqlited

# Shorter raft timeouts than rqlite's defaults (1 s) make failovers quicker.
QUICK_FAILOVER_ARGS = ("-raft-election-timeout", "500ms", "-raft-heartbeat-timeout", "500ms")
# For a cluster that mostly sits idle and whose nodes no one stops (a test
# session's shared one): an idle leader sends each follower an append every
# commit timeout (50 ms) and a heartbeat every tenth of the heartbeat timeout,
# which cost 3 idle nodes 5% of a core; with these, 0.75% (2026-12-03, on
# 2 cores). The first election takes about 3 s, against 1 s.
QUIET_IDLE_ARGS = (
    "-raft-commit-timeout",
    "2s",
    "-raft-election-timeout",
    "2s",
    "-raft-heartbeat-timeout",
    "2s",
)
STOP_TIMEOUT_SECONDS = 15.0
_REQUEST_TIMEOUT = 2.0
# Exit codes of a node that did not fail by itself: still running, clean, or killed by us.
_EXPECTED_EXITS = (None, 0, -signal.SIGKILL, -signal.SIGTERM)
# rqlited can die as it starts when a peer connects before it has registered
# every listener on its connection mux: an unguarded map, read and written at
# once (rqlite issue #325, left unfixed upstream). Nodes that all join each
# other at once make that likelier. These lines in its log name that crash.
_MUX_RACE_SIGNS = ("fatal error: concurrent map", "tcp.(*Mux).handleConn")
_MUX_RACE_RESTARTS = 3


@dataclass
class RqliteNode:
    """One ``rqlited``: its ports, its directory, and its process (started here or recorded)."""

    node_id: str
    http_port: int
    raft_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    recorded_pid: int | None = None  # started by another command: known by pid only
    tls: bool = False
    log_start: int = 0  # where this run's lines begin in the log, which every run appends to

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "rqlited.log"

    @property
    def http_addr(self) -> str:
        return f"{HOST}:{self.http_port}"

    @property
    def raft_addr(self) -> str:
        return f"{HOST}:{self.raft_port}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.http_addr}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else self.recorded_pid

    @property
    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        # Another command's rqlited names this node's data directory on its command line.
        return self.recorded_pid is not None and runs_with(self.recorded_pid, str(self.data_dir))

    def record(self, argv: list[str]) -> None:
        """Write what identifies the running node into its directory."""
        (self.directory / "pid").write_text(f"{self.pid}\n")
        (self.directory / "http").write_text(f"{self.http_addr}\n")
        (self.directory / "raft").write_text(f"{self.raft_addr}\n")
        (self.directory / "cmdline").write_text("\n".join(argv) + "\n")


@dataclass
class RqliteCluster:
    """``size`` rqlited processes bootstrapping together on loopback.

    Ports are free ones the kernel picks, unless ``http_base`` is given: then
    node i uses ``http_base + 2(i-1)`` for HTTP and ``raft_base + 2(i-1)``
    for Raft (``raft_base`` defaults to ``http_base + 1``).
    """

    binary: str
    root: Path
    size: int = 3
    extra_args: list[str] = field(default_factory=list)
    credentials: tuple[str, str] | None = None
    tls: TlsFiles | None = None
    http_base: int | None = None
    raft_base: int | None = None
    # rqlited's raft timeouts: rqlite's defaults where empty.
    raft_timing: tuple[str, ...] = QUICK_FAILOVER_ARGS
    nodes: list[RqliteNode] = field(default_factory=list)
    _client_ssl: ssl.SSLContext | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.nodes:
            return
        if self.http_base is None:
            ports = free_ports(2 * self.size)
            http_ports, raft_ports = ports[0::2], ports[1::2]
        else:
            raft_base = self.raft_base if self.raft_base is not None else self.http_base + 1
            http_ports = [self.http_base + 2 * index for index in range(self.size)]
            raft_ports = [raft_base + 2 * index for index in range(self.size)]
        for index in range(self.size):
            self.nodes.append(
                RqliteNode(
                    node_id=f"node{index + 1}",
                    http_port=http_ports[index],
                    raft_port=raft_ports[index],
                    directory=self.root / f"node{index + 1}",
                    tls=self.tls is not None,
                )
            )

    @classmethod
    def recorded(cls, root: Path) -> RqliteCluster | None:
        """The cluster whose nodes are recorded under ``root``, or None if there are none."""
        nodes = []
        for directory in sorted(root.glob("node*"), key=_node_number):
            try:
                http_addr = (directory / "http").read_text().strip()
                raft_addr = (directory / "raft").read_text().strip()
            except OSError:
                continue
            nodes.append(
                RqliteNode(
                    node_id=directory.name,
                    http_port=int(http_addr.rpartition(":")[2]),
                    raft_port=int(raft_addr.rpartition(":")[2]),
                    directory=directory,
                    recorded_pid=read_pid(directory / "pid"),
                )
            )
        if not nodes:
            return None
        return cls(binary="", root=root, size=len(nodes), nodes=nodes)

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

    # -- processes

    def start(self, timeout: float = 60.0, *, every_node: bool = False) -> None:
        """Start every node of a new cluster and wait for a leader (known to ``every_node``).

        A node that loses rqlited's start-up race (see ``_MUX_RACE_SIGNS``)
        before the cluster has a leader is started again on an empty data
        directory: it holds nothing yet, and it joins as a new node would
        (one restarted later, by :meth:`start_node`, keeps its data).
        """
        for node in self.nodes:
            self.start_node(node)
        self._wait_for_leader(timeout, every_node=every_node, forming=True)
        (self.root / "url").write_text(f"{self.url}\n")

    def start_node(self, node: RqliteNode) -> None:
        # A single node bootstraps alone; a cluster's nodes wait for each other,
        # every one joining all, so they may start in any order.
        joining: list[str] = []
        if self.size > 1:
            join = ",".join(other.raft_addr for other in self.nodes)
            joining = ["-bootstrap-expect", str(self.size), "-join", join]
            joining += ["-join-interval", "250ms", "-join-attempts", "120"]
        https: list[str] = []
        if self.tls is not None:
            https = ["-http-cert", str(self.tls.cert), "-http-key", str(self.tls.key)]
        argv = [
            self.binary,
            *("-node-id", node.node_id),
            *("-http-addr", node.http_addr),
            *("-raft-addr", node.raft_addr),
            *joining,
            *self.raft_timing,
            *https,
            *self.extra_args,
            str(node.data_dir),
        ]
        self.launch(node, argv)

    def launch(self, node: RqliteNode, argv: list[str]) -> None:
        """Run ``rqlited`` as ``argv`` for ``node``, and record what identifies it."""
        node.data_dir.mkdir(parents=True, exist_ok=True)
        with node.log_path.open("ab") as log:
            node.log_start = log.tell()
            # A session of its own: the node outlives a command that started it.
            node.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        node.record(argv)

    def kill_node(
        self, node: RqliteNode, sig: int = signal.SIGKILL, timeout: float = STOP_TIMEOUT_SECONDS
    ) -> None:
        """Send ``sig``, wait up to ``timeout`` for the node to exit, then SIGKILL it."""
        if node.process is not None:
            if node.process.poll() is None:
                os.kill(node.process.pid, sig)
                try:
                    node.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    os.kill(node.process.pid, signal.SIGKILL)
                    node.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            return
        pid = node.recorded_pid
        if pid is None or not node.alive:
            return
        with suppress(ProcessLookupError):
            os.kill(pid, sig)
        if not wait_until(lambda: process_gone(pid), timeout, interval=0.1) and node.alive:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM every node, each given ``timeout`` seconds before SIGKILL."""
        for node in self.nodes:
            self.kill_node(node, signal.SIGTERM, timeout)

    def _lost_the_mux_race(self, node: RqliteNode) -> bool:
        try:
            with node.log_path.open("rb") as log:
                log.seek(node.log_start)
                said = log.read().decode(errors="replace")
        except OSError:
            return False
        return all(sign in said for sign in _MUX_RACE_SIGNS)

    def _start_again(self, node: RqliteNode, *, empty: bool) -> None:
        """Run the node's command again, on an empty data directory when ``empty``."""
        argv = (node.directory / "cmdline").read_text().splitlines()  # as node.record wrote it
        if empty:
            shutil.rmtree(node.data_dir, ignore_errors=True)
        with node.log_path.open("a") as log:
            log.write("taskq: rqlited lost its start-up race (rqlite issue #325); started again\n")
        self.launch(node, argv)

    def log_tail(self, node: RqliteNode, lines: int = 20) -> str:
        try:
            text = node.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"[{node.node_id}: no log]"
        return f"[{node.node_id}]\n" + "\n".join(text)

    # -- the HTTP API

    def _request(self, node: RqliteNode, path: str) -> urllib.request.Request:
        request = urllib.request.Request(f"{node.base_url}{path}")
        if self.credentials:
            token = base64.b64encode(":".join(self.credentials).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return request

    def _open(self, request: urllib.request.Request) -> http.client.HTTPResponse:
        """``urlopen`` with a short timeout, trusting the cluster's CA when the API is HTTPS."""
        if self.tls is not None and self._client_ssl is None:
            self._client_ssl = self.tls.client_context()
        response: http.client.HTTPResponse = urllib.request.urlopen(
            request, timeout=_REQUEST_TIMEOUT, context=self._client_ssl
        )
        return response

    def get_json(self, node: RqliteNode, path: str) -> dict[str, object] | None:
        """``GET path`` on ``node`` as JSON, or None when it does not answer well."""
        try:
            with self._open(self._request(node, path)) as response:
                data: dict[str, object] = json.load(response)
                return data
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def status(self, node: RqliteNode) -> dict[str, object] | None:
        return self.get_json(node, "/status")

    def raft_view(self, node: RqliteNode) -> tuple[str, str] | None:
        """The node's own raft state and the leader's node id (``""`` when it knows none)."""
        status = self.status(node)
        if status is None:
            return None
        store = _mapping(status.get("store"))
        raft, leader = _mapping(store.get("raft")), _mapping(store.get("leader"))
        return str(raft.get("state", "?")), str(leader.get("node_id") or "")

    def local_rows(self, node: RqliteNode, sql: str) -> list[dict[str, object]] | None:
        """Rows of ``sql`` read from ``node``'s own copy (level none), or None if it fails."""
        query = urllib.parse.urlencode({"q": sql, "level": "none", "associative": ""})
        data = self.get_json(node, f"/db/query?{query}")
        if data is None:
            return None
        results = data.get("results")
        result = results[0] if isinstance(results, list) and results else {}
        if not isinstance(result, dict) or "error" in result:
            return None
        rows: list[dict[str, object]] = result.get("rows", [])
        return rows

    def leader(self) -> RqliteNode | None:
        """The live node whose own raft state is Leader, if exactly one claims it."""
        leaders = []
        for node in self.nodes:
            if node.alive:
                view = self.raft_view(node)
                if view is not None and view[0] == "Leader":
                    leaders.append(node)
        return leaders[0] if len(leaders) == 1 else None

    def wait_for_leader(self, timeout: float = 30.0, *, every_node: bool = False) -> RqliteNode:
        """The leader once it is ready (and, with ``every_node``, every node names a leader).

        A node restarted (:meth:`start_node`) that loses rqlited's start-up race
        is started again on its data.
        """
        return self._wait_for_leader(timeout, every_node=every_node, forming=False)

    def _wait_for_leader(self, timeout: float, *, every_node: bool, forming: bool) -> RqliteNode:
        deadline = time.monotonic() + timeout
        restarts = 0
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader is not None and self._ready(leader) and self._all_know_a_leader(every_node):
                return leader
            for node in self.nodes:
                if node.process is None or node.process.poll() in _EXPECTED_EXITS:
                    continue
                if restarts < _MUX_RACE_RESTARTS and self._lost_the_mux_race(node):
                    restarts += 1
                    self._start_again(node, empty=forming)
                    continue
                raise RuntimeError(f"rqlited {node.node_id} exited:\n{self.log_tail(node)}")
            time.sleep(0.1)
        raise TimeoutError(
            f"no rqlite leader within {timeout:g}s; logs:\n"
            + "\n".join(self.log_tail(node) for node in self.nodes)
        )

    def _all_know_a_leader(self, wanted: bool) -> bool:
        if not wanted:
            return True
        views = [self.raft_view(node) for node in self.nodes]
        return all(view is not None and view[1] for view in views)

    def _ready(self, node: RqliteNode) -> bool:
        try:
            with self._open(self._request(node, "/readyz")) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _node_number(directory: Path) -> int:
    digits = directory.name.removeprefix("node")
    return int(digits) if digits.isdigit() else 0


@contextmanager
def running_cluster(
    root: Path,
    size: int = 3,
    extra_args: list[str] | None = None,
    credentials: tuple[str, str] | None = None,
    tls: TlsFiles | None = None,
    *,
    binary: str | None = None,
    raft_timing: tuple[str, ...] = QUICK_FAILOVER_ARGS,
) -> Iterator[RqliteCluster]:
    """Start a cluster under ``root``; SIGKILL every node and remove ``root`` on exit."""
    cluster = RqliteCluster(
        binary=binary or find_rqlited(),
        root=root,
        size=size,
        extra_args=extra_args or [],
        credentials=credentials,
        tls=tls,
        raft_timing=raft_timing,
    )
    try:
        cluster.start()
        yield cluster
    finally:
        for node in cluster.nodes:
            cluster.kill_node(node, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
