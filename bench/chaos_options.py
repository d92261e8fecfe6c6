"""The options of one chaos run (:mod:`bench.chaos`), read by its load, faults and verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos_faults import Fault


@dataclass
class Options:
    """One chaos run; :func:`preset` gives the defaults of each store, quick or full."""

    store: str = "embedded"
    quick: bool = False
    jobs: int = 2_000
    long_jobs: int = 20
    long_seconds: tuple[float, float] = (15.0, 45.0)
    short_seconds: float = 0.3
    workflows: int = 40  # besides the plain jobs (bench/chaos_workflows.py)
    fan_in_width: tuple[int, int] = (3, 12)
    fan_in_long_parents: int = 1  # long jobs among a fan-in's parents, for faults to hit
    workflow_span: float | None = None  # seconds to submit the workflows over (None: the jobs')
    workers: int = 3
    concurrency: int = 4
    duration: float = 150.0
    drain_timeout: float = 300.0
    seed: int = 1
    lease_seconds: float = 6.0
    heartbeat_seconds: float = 1.0
    lease_margin_seconds: float = 1.5
    worker_kill: Fault = field(default_factory=lambda: Fault(5.0, first=5.0))
    stop: Fault = field(default_factory=lambda: Fault(30.0, first=8.0))
    leader_kill: Fault = field(default_factory=lambda: Fault(10.0, first=10.0))
    cut: Fault = field(default_factory=lambda: Fault(30.0, first=20.0))
    restart_after: float = 1.0  # a killed worker's successor starts this much later
    leader_down_seconds: float = 3.0
    cut_mode: str = "refuse"
    tolerance: float = 0.05
    keep: Path | None = None
    json_path: Path | None = None

    @property
    def stop_seconds(self) -> float:
        return self.lease_seconds + 3.0

    @property
    def cut_seconds(self) -> float:
        return self.lease_seconds + 4.0
