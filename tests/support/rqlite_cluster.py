"""The test suite's rqlite clusters: :mod:`taskq.dev.cluster` on the tier's rqlited.

The binary is the one :mod:`tests.support.rqlite_tier` found at start-up
(``TASKQ_RQLITED``); without one the tier's tests are skipped as a whole
before they get here.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from taskq.dev.certificates import TlsFiles, TlsSetupFailed, make_test_certificates
from taskq.dev.cluster import RqliteCluster, RqliteNode, running_cluster
from taskq.dev.processes import port_is_free

__all__ = [
    "REPO",
    "STORE_KINDS",
    "RqliteCluster",
    "RqliteNode",
    "TlsFiles",
    "TlsSetupFailed",
    "free_base",
    "make_test_certificates",
    "running_cluster",
]

REPO = Path(__file__).resolve().parents[2]

STORE_KINDS = ["sqlite", pytest.param("rqlite", marks=pytest.mark.rqlite)]
"""Params of a fixture that gives each test a store of each kind; the rqlite one is in the tier."""


def free_base(ports: int) -> int:
    """An even port from which ``ports`` ports in a row are free on loopback now: the
    ``--http-base`` of a ``taskq dev cluster`` whose ports are on a stride."""
    for _ in range(100):
        base = random.randrange(20_000, 60_000, 2)
        if all(port_is_free(port) for port in range(base, base + ports)):
            return base
    raise RuntimeError("no run of free ports on loopback")
