"""A 3-node rqlite cluster and worker hosts, each in a namespace of its own, behind delays.

Each store node's namespace runs ``rqlited`` on its own loopback
(``127.0.0.1:4001`` HTTP, ``:4002`` Raft), advertising its address on the
bridge, where a :mod:`bench.delay_proxy` listens and forwards to it: a worker,
a client or another node reaches a node only through that forwarder, so
every worker→store and node→node connection carries the round trip it is
set to. (A submitting client's wake-up hint to a worker is a UDP datagram and
goes undelayed.) Workers are ``taskq-worker`` processes in their hosts'
namespaces, started and stopped by pid (:class:`taskq.dev.workers.WorkerFleet`);
:meth:`NetworkCluster.close` stops everything before the LAN goes.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from bench.common import jobs_pythonpath
from bench.netns import Host, Lan
from taskq.dev.rqlited import find_rqlited
from taskq.dev.workers import WorkerFleet, environment_without, worker_command

HTTP_PORT = 4001
RAFT_PORT = 4002
QUEUE = "net"
_PROXY = Path(__file__).with_name("delay_proxy.py")
_STOP_TIMEOUT = 15.0


@dataclass
class StoreNode:
    """One node's host, its forwarder and its ``rqlited``."""

    host: Host
    proxy: subprocess.Popen[str]
    rqlited: subprocess.Popen[bytes]

    @property
    def http(self) -> str:
        return f"{self.host.address}:{HTTP_PORT}"


@dataclass
class NetworkCluster:
    """``nodes`` store hosts, ``worker_hosts`` hosts of ``per_host`` workers, and a client host."""

    lan: Lan
    root: Path
    nodes: int = 3
    worker_hosts: int = 2
    per_host: int = 2
    concurrency: int = 4
    rtt_ms: float = 0.0
    store: list[StoreNode] = field(default_factory=list)
    fleet: WorkerFleet | None = None

    def __post_init__(self) -> None:
        self.client = self.lan.add("cl")
        self.store_hosts = [self.lan.add(f"db{n + 1}") for n in range(self.nodes)]
        self.workers = [self.lan.add(f"wk{n + 1}") for n in range(self.worker_hosts)]

    @property
    def url(self) -> str:
        return "rqlite://" + ",".join(f"{h.address}:{HTTP_PORT}" for h in self.store_hosts)

    def start_store(self) -> None:
        """Each node's forwarder, then its ``rqlited``, joining the others through theirs."""
        binary = find_rqlited()
        join = ",".join(f"{host.address}:{RAFT_PORT}" for host in self.store_hosts)
        for number, host in enumerate(self.store_hosts, start=1):
            forwards = [
                f"{host.address}:{port}=127.0.0.1:{port}" for port in (HTTP_PORT, RAFT_PORT)
            ]
            proxy = subprocess.Popen(
                host.wrap([sys.executable, str(_PROXY), "--rtt-ms", str(self.rtt_ms)])
                + [arg for forward in forwards for arg in ("--forward", forward)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            assert proxy.stdout is not None
            if proxy.stdout.readline().strip() != "ready":
                proxy.kill()
                raise RuntimeError(f"the delaying forwarder of {host.namespace} did not start")
            directory = self.root / f"node{number}"
            directory.mkdir(parents=True, exist_ok=True)
            argv = [
                binary,
                *("-node-id", f"node{number}"),
                *("-http-addr", f"127.0.0.1:{HTTP_PORT}"),
                *("-http-adv-addr", f"{host.address}:{HTTP_PORT}"),
                *("-raft-addr", f"127.0.0.1:{RAFT_PORT}"),
                *("-raft-adv-addr", f"{host.address}:{RAFT_PORT}"),
                *("-bootstrap-expect", str(self.nodes), "-join", join),
                *("-join-interval", "250ms", "-join-attempts", "120"),
                str(directory / "data"),
            ]
            with (directory / "rqlited.log").open("ab") as log:
                rqlited = subprocess.Popen(
                    host.wrap(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.store.append(StoreNode(host, proxy, rqlited))

    def set_rtt(self, rtt_ms: float) -> None:
        """Every forwarder's added round trip, in milliseconds, from now on."""
        for node in self.store:
            assert node.proxy.stdin is not None
            assert node.proxy.stdout is not None
            node.proxy.stdin.write(f"rtt {rtt_ms}\n")
            node.proxy.stdin.flush()
            if node.proxy.stdout.readline().strip() != "ok":
                raise RuntimeError(f"the forwarder of {node.host.namespace} did not take rtt")
        self.rtt_ms = rtt_ms

    def start_workers(self, timeout: float = 60.0) -> WorkerFleet:
        """``per_host`` workers on each worker host, serving :data:`QUEUE`; wait until started."""
        config = self.root / "worker.toml"
        config.write_text('[worker]\nmodules = ["bench.jobs"]\n', encoding="utf-8")
        env = {**environment_without("TASKQ_"), "PYTHONPATH": jobs_pythonpath()}
        self.fleet = WorkerFleet(self.root / "workers", env=env)
        for number, host in enumerate(self.workers, start=1):
            for index in range(1, self.per_host + 1):
                tag = f"host{number}-{index}"
                argv = [*worker_command(), *("--store", self.url, "--name", tag)]
                argv += ["--queues", QUEUE, "--concurrency", str(self.concurrency)]
                argv += ["--config", str(config), "--log-format", "json"]
                self.fleet.launch(tag, host.wrap(argv))
        for worker in self.fleet.workers:
            worker.wait_for_event("worker_started", timeout=timeout)
        return self.fleet

    def close(self) -> None:
        """Stop the workers, the nodes and the forwarders, by pid."""
        if self.fleet is not None:
            self.fleet.close()
        for node in self.store:
            for process in (node.rqlited, node.proxy):
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(timeout=_STOP_TIMEOUT)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(timeout=_STOP_TIMEOUT)
            if node.proxy.stdin is not None:
                with suppress(OSError):
                    node.proxy.stdin.close()
            if node.proxy.stdout is not None:
                node.proxy.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
