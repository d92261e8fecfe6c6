"""The test suite's rqlite clusters: :mod:`taskq.dev.cluster` on the tier's rqlited.

The binary is the one :mod:`tests.support.rqlite_tier` found at start-up
(``TASKQ_RQLITED``); without one the tier's tests are skipped as a whole
before they get here.
"""

from __future__ import annotations

import os
import random
import signal
from contextlib import suppress
from pathlib import Path

import pytest

from taskq.dev.certificates import TlsFiles, TlsSetupFailed, make_test_certificates
from taskq.dev.cluster import QUIET_IDLE_ARGS, RqliteCluster, RqliteNode, running_cluster
from taskq.dev.processes import port_is_free, runs_with, server_ports

__all__ = [
    "QUIET_IDLE_ARGS",
    "REPO",
    "STORE_KINDS",
    "RqliteCluster",
    "RqliteNode",
    "TlsFiles",
    "TlsSetupFailed",
    "free_base",
    "kill_still_running",
    "make_test_certificates",
    "recorded_processes",
    "running_cluster",
]

REPO = Path(__file__).resolve().parents[2]

STORE_KINDS = ["sqlite", pytest.param("rqlite", marks=pytest.mark.rqlite)]
"""Params of a fixture that gives each test a store of each kind; the rqlite one is in the tier."""


def free_base(count: int) -> int:
    """An even port from which ``count`` ports in a row are free on loopback now: the
    ``--http-base`` of a ``taskq dev cluster`` whose ports are on a stride.

    Taken below the ports the kernel gives connections: a node added later binds
    its port on the stride then, and the suite's many connections would otherwise
    take one of them meanwhile."""
    # Where connections may take any port, any run is as good as another.
    ports = server_ports()
    if len(ports) <= 1000:
        ports = range(20_000, 60_000)
    for _ in range(100):
        base = random.randrange(ports.start, ports.stop - count, 2)
        if all(port_is_free(port) for port in range(base, base + count)):
            return base
    raise RuntimeError("no run of free ports on loopback")


def recorded_processes(directory: Path) -> dict[int, str]:
    """Each process a ``taskq dev cluster`` recorded in ``directory``: its pid, and what its
    command line holds (a node's data directory as it was started with, a worker's name)."""
    found = {}
    for pattern, marker in (("node*/pid", _launched_data_dir), ("worker*/pid", _worker_name)):
        for pidfile in directory.glob(pattern):
            with suppress(ValueError):
                found[int(pidfile.read_text())] = marker(pidfile.parent)
    return found


def _launched_data_dir(node: Path) -> str:
    # The last argument it was started with, however written: a test cleans up even after
    # the commands it tests recorded a path other than the one it expects.
    with suppress(OSError, IndexError):
        return (node / "cmdline").read_text().splitlines()[-1]
    return str(node / "data")


def _worker_name(worker: Path) -> str:
    return f"--name {worker.name} "


def kill_still_running(processes: dict[int, str]) -> None:
    """SIGKILL each of :func:`recorded_processes` that still runs with its marker (the marker
    tells it from a later process under its pid)."""
    for pid, marker in processes.items():
        if runs_with(pid, marker):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
