"""The developer's local cluster: rqlite nodes and workers that outlive the command.

``taskq dev cluster start`` starts them, ``status`` reads them and ``stop``
stops them, all through the cluster's directory (default
``${XDG_RUNTIME_DIR:-/tmp}/taskq-cluster``): the nodes as in
:mod:`taskq.dev.cluster`, each worker in ``worker<i>/{worker.log,pid}``,
and the store URL in ``url``. A start wipes the previous cluster's data:
every start is a fresh cluster. The defaults come from the environment
(``TASKQ_CLUSTER_DIR``, ``TASKQ_CLUSTER_HTTP_BASE`` and the like below).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.dev.cluster import RqliteCluster, RqliteNode
from taskq.dev.processes import port_is_free, process_gone, read_pid, runs_with, stop_recorded
from taskq.dev.rqlited import RqlitedMissing, find_rqlited
from taskq.dev.workers import WorkerFleet, environment_without

DIR_ENV = "TASKQ_CLUSTER_DIR"
HTTP_BASE_ENV = "TASKQ_CLUSTER_HTTP_BASE"
RAFT_BASE_ENV = "TASKQ_CLUSTER_RAFT_BASE"
RQLITED_ARGS_ENV = "TASKQ_CLUSTER_RQLITED_ARGS"
START_TIMEOUT_ENV = "TASKQ_CLUSTER_START_TIMEOUT"
STOP_TIMEOUT_ENV = "TASKQ_CLUSTER_STOP_TIMEOUT"
MODULES_ENV = "TASKQ_WORKER_MODULES"
DEFAULT_HTTP_BASE = 4001
DEFAULT_MODULES = "taskq.demo_jobs"
# A draining worker may finish its jobs first: it gets this much more than a node.
_WORKER_DRAIN_SECONDS = 30.0
# How long a check of a recorded cluster waits for a node's answer.
_CHECK_TIMEOUT_SECONDS = 5


def default_dir() -> Path:
    """``TASKQ_CLUSTER_DIR``, else ``taskq-cluster`` in the runtime directory or /tmp."""
    configured = os.environ.get(DIR_ENV)
    if configured:
        return Path(configured).resolve()
    return (Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / "taskq-cluster").resolve()


def _env_number(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise errors.ConfigError(f"{name}={value} is not a number") from None


@dataclass(frozen=True)
class LocalCluster:
    """Where the local cluster lives and how it starts; defaults from the environment."""

    directory: Path = field(default_factory=default_dir)
    nodes: int = 3
    workers: int = 0
    http_base: int = field(
        default_factory=lambda: int(_env_number(HTTP_BASE_ENV, DEFAULT_HTTP_BASE))
    )
    raft_base: int | None = field(
        default_factory=lambda: int(_env_number(RAFT_BASE_ENV, 0)) or None
    )
    rqlited_args: Sequence[str] = field(
        default_factory=lambda: os.environ.get(RQLITED_ARGS_ENV, "").split()
    )
    modules: str = field(default_factory=lambda: os.environ.get(MODULES_ENV) or DEFAULT_MODULES)
    queues: str | None = None  # None: each worker takes its own default queues
    start_timeout: float = field(default_factory=lambda: _env_number(START_TIMEOUT_ENV, 60.0))
    stop_timeout: float = field(default_factory=lambda: _env_number(STOP_TIMEOUT_ENV, 10.0))

    def __post_init__(self) -> None:
        # A later command finds a node by its data directory on the node's command
        # line (the guard against a reused pid), whatever directory it runs from:
        # so every node is started with an absolute one.
        object.__setattr__(self, "directory", self.directory.resolve())

    def command(self, action: str) -> str:
        """The ``taskq dev cluster ACTION`` line for this cluster: with ``--dir`` when its
        directory is not the one the command finds by itself."""
        line = f"taskq dev cluster {action}"
        if self.directory != default_dir():
            line += f" --dir {shlex.quote(str(self.directory))}"
        return line

    def recorded(self) -> RqliteCluster | None:
        return RqliteCluster.recorded(self.directory)

    def url(self) -> str | None:
        """The store URL recorded by the last start, if any."""
        try:
            return (self.directory / "url").read_text().strip() or None
        except OSError:
            return None

    def running_url(self) -> str | None:
        """The recorded URL when a node named there reports a leader, else None."""
        url = self.url()
        if url is None:
            return None
        try:
            store = open_store(f"{url}?timeout={_CHECK_TIMEOUT_SECONDS}", migrate=False)
        except errors.ConfigError:
            return None
        try:
            return url if any(node.leader for node in store.nodes()) else None
        except errors.StoreError:
            return None
        finally:
            store.close()

    def start(self, say: Callable[[str], None]) -> str:
        """Start a fresh cluster (and its workers); its store URL. ``say`` tells the progress."""
        previous = self.recorded()
        if previous is not None and any(node.alive for node in previous.nodes):
            raise errors.TaskqError(
                f"a cluster is already running in {self.directory} (run: {self.command('stop')})"
            )
        try:
            binary = find_rqlited()
        except RqlitedMissing as exc:
            raise errors.TaskqError(str(exc)) from None
        cluster = RqliteCluster(
            binary=binary,
            root=self.directory,
            size=self.nodes,
            extra_args=list(self.rqlited_args),
            http_base=self.http_base,
            raft_base=self.raft_base,
            raft_timing=(),
        )
        for node in cluster.nodes:
            for port, variable in (
                (node.http_port, HTTP_BASE_ENV),
                (node.raft_port, RAFT_BASE_ENV),
            ):
                if not port_is_free(port):
                    raise errors.TaskqError(f"port {port} on loopback is in use (set {variable})")
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True)
        try:
            cluster.start(self.start_timeout, every_node=True)
        except (RuntimeError, TimeoutError) as exc:
            cluster.stop(self.stop_timeout)
            raise errors.TaskqError(f"the cluster did not come up: {exc}") from None
        for node in cluster.nodes:
            say(f"{node.node_id}: pid {node.pid}, http {node.http_addr}, log {node.log_path}")
        if self.workers:
            self._start_workers(cluster.url, say)
        return cluster.url

    def _start_workers(self, url: str, say: Callable[[str], None]) -> None:
        # The workers outlive this command: the fleet is never closed here.
        fleet = WorkerFleet(self.directory, env=environment_without("TASKQ_"))
        for index in range(1, self.workers + 1):
            tag = f"worker{index}"
            worker = fleet.start(url, tag=tag, args=self.worker_args())
            (self.directory / tag / "pid").write_text(f"{worker.pid}\n")
            say(f"{tag}: pid {worker.pid}, log {worker.log_path}")

    def worker_args(self) -> tuple[str, ...]:
        """The options each started worker gets besides its store and name."""
        queues = ("--queues", self.queues) if self.queues is not None else ()
        return ("--modules", self.modules, *queues)

    def worker_pids(self) -> dict[str, int | None]:
        """Each recorded worker's pid while it still runs (else None), by name."""
        found = {}
        for directory in sorted(self.directory.glob("worker*")):
            pid = read_pid(directory / "pid")
            alive = pid is not None and runs_with(pid, _worker_marker(directory.name))
            found[directory.name] = pid if alive else None
        return found

    def stop(self, say: Callable[[str], None]) -> StopOutcome:
        """Stop the recorded workers (they drain), then the nodes.

        A node's pid file is removed once its process is gone. A recorded pid
        that runs without the node's data directory on its command line may
        be another program's by now: it is left running, its pid file kept,
        and ``say`` tells how to tell and what to do.
        """
        workers = [(pid, _worker_marker(name)) for name, pid in self.worker_pids().items() if pid]
        for pid in stop_recorded(workers, self.stop_timeout + _WORKER_DRAIN_SECONDS):
            say(f"worker pid {pid}: stopped")
        for pidfile in self.directory.glob("worker*/pid"):
            pidfile.unlink(missing_ok=True)
        cluster = self.recorded()
        recorded = [
            (node, node.recorded_pid)
            for node in (cluster.nodes if cluster else [])
            if node.recorded_pid is not None
        ]
        stopped = stop_recorded(
            [(pid, str(node.data_dir)) for node, pid in recorded], self.stop_timeout
        )
        gone, left = 0, []
        for node, pid in recorded:
            pidfile = node.directory / "pid"
            if process_gone(pid):
                gone += pid in stopped
                pidfile.unlink(missing_ok=True)
                continue
            left.append(node.node_id)
            if pid in stopped:
                say(f"{node.node_id}: pid {pid} still runs after SIGKILL; its pid file is kept")
            else:
                say(
                    f"{node.node_id}: not stopped: pid {pid} runs without {node.data_dir} on its "
                    f"command line, so it may be another program's (if it is this node, run "
                    f"kill {pid}; if not, remove {pidfile})"
                )
        return StopOutcome(stopped=gone, left=tuple(left))


@dataclass(frozen=True)
class StopOutcome:
    """What :meth:`LocalCluster.stop` did to the nodes."""

    stopped: int  # nodes that ran and are gone now
    left: tuple[str, ...]  # ids of the nodes whose recorded pid still runs


def _worker_marker(name: str) -> str:
    # The worker's name is followed by its other options on its command line.
    return f"--name {name} "


def node_line(cluster: RqliteCluster, node: RqliteNode) -> tuple[str, str, str, str, str]:
    """NODE, PID, HTTP, STATE, LEADER of one recorded node."""
    if not node.alive:
        return node.node_id, "-", node.http_addr, "down", "-"
    view = cluster.raft_view(node)
    if view is None:
        return node.node_id, str(node.pid), node.http_addr, "no-answer", "-"
    return node.node_id, str(node.pid), node.http_addr, view[0], view[1] or "-"
