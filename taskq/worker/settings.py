"""A worker's settings: the config file's [worker] section, then command-line flags.

Values are checked here, with errors that name the setting, so a typo stops
the worker at start rather than leaving it running with a default.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from taskq import errors
from taskq.broker.limits import Limits, LimitsInvalid, parse_limits
from taskq.worker.cpus import check_available, parse_cpu_list

ISOLATION_MODES = ("pool", "process")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How one worker process behaves."""

    queues: tuple[str, ...] = ("default",)
    # The modules (or packages) whose functions this worker runs as ``call``
    # jobs: nothing else is run (see taskq.worker.payloads.Policy).
    modules: tuple[str, ...] = ()
    concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    labels: tuple[str, ...] = ()
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    isolation: str = "pool"
    lease_seconds: float = 30.0
    heartbeat_seconds: float = 5.0
    # Jobs are killed this long before their leases could expire in the store
    # (the store nodes' clock error it tolerates: see taskq.worker.lease_deadline).
    lease_margin_seconds: float = 2.0
    grace_seconds: float = 30.0
    idle_poll_seconds: float = 1.0
    allow_python_exec: bool = False
    allow_shell: bool = False
    # Variables (or fnmatch patterns) of the worker's environment that jobs see,
    # beyond the base set of taskq.worker.job_environment.
    env_passthrough: tuple[str, ...] = ()
    maintenance: bool = True
    # Respawning a pool child costs ~80 ms; a child that misbehaves is replaced at once.
    pool_recycle_after: int = 10_000
    max_limits: Limits = field(default_factory=Limits)
    # None: wherever the machine lets it run.
    cpus: frozenset[int] | None = None
    # Most jobs claimed beyond the free slots while jobs are short (see
    # taskq.worker.prefetch); None: four times the concurrency; 0: never.
    prefetch: int | None = None
    # Most jobs a pool slot hands its child at once while jobs are short (see
    # Worker._may_queue); 1: one at a time.
    child_queue: int = 4

    def __post_init__(self) -> None:
        if not self.queues or not all(isinstance(q, str) and q for q in self.queues):
            raise errors.ConfigError("worker: queues must be a non-empty list of names")
        if not all(isinstance(label, str) and label for label in self.labels):
            raise errors.ConfigError("worker: labels must be non-empty strings")
        for module in self.modules:
            if not isinstance(module, str) or not _MODULE.fullmatch(module):
                raise errors.ConfigError(f"worker: modules: {module!r} is not a module name")
        if not all(isinstance(name, str) and name for name in self.env_passthrough):
            raise errors.ConfigError("worker: env_passthrough must be non-empty names")
        if self.isolation not in ISOLATION_MODES:
            raise errors.ConfigError(
                f"worker: isolation must be one of {', '.join(ISOLATION_MODES)}, "
                f"got {self.isolation!r}"
            )
        for name, least in (
            ("concurrency", 1),
            ("pool_recycle_after", 1),
            ("prefetch", 0),
            ("child_queue", 1),
        ):
            value = getattr(self, name)
            if value is None:  # prefetch's default, worked out from the concurrency
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise errors.ConfigError(
                    f"worker: {name} must be a whole number >= {least}, got {value!r}"
                )
        for name in (
            "lease_seconds",
            "heartbeat_seconds",
            "lease_margin_seconds",
            "grace_seconds",
            "idle_poll_seconds",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise errors.ConfigError(f"worker: {name} must be a number, got {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise errors.ConfigError(f"worker: {name} must be positive, got {value!r}")
        if self.heartbeat_seconds * 2 + self.lease_margin_seconds > self.lease_seconds:
            raise errors.ConfigError(
                "worker: lease_seconds must be at least two heartbeat_seconds plus "
                "lease_margin_seconds, so one missed heartbeat stops no job (got "
                f"lease_seconds={self.lease_seconds}, heartbeat_seconds={self.heartbeat_seconds}, "
                f"lease_margin_seconds={self.lease_margin_seconds})"
            )
        if not self.name:
            raise errors.ConfigError("worker: name must not be empty")

    def check_runs_something(self) -> None:
        """Refuse settings under which the worker would refuse every job (no modules)."""
        if not (self.modules or self.allow_python_exec or self.allow_shell):
            raise errors.ConfigError(
                "worker: no modules given: name the modules whose functions this worker "
                "runs (--modules pkg.tasks, or [worker] modules), or it would refuse every job"
            )

    @property
    def most_prefetch(self) -> int:
        # Four times: with no-op jobs on 2 cores, 4 slots drained 8% faster with
        # 16 than with 8 (paired runs), and no faster with 32.
        return 4 * self.concurrency if self.prefetch is None else self.prefetch


def settings_from(
    section: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> WorkerSettings:
    """Settings from a config section, then non-None ``overrides`` (command-line flags)."""
    values: dict[str, Any] = dict(section)
    values.update({key: value for key, value in (overrides or {}).items() if value is not None})
    for key in ("queues", "labels", "modules", "env_passthrough"):
        if key in values:
            values[key] = _names(key, values[key])
    for key in ("allow_python_exec", "allow_shell", "maintenance"):
        if key in values and not isinstance(values[key], bool):
            raise errors.ConfigError(f"worker: {key} must be true or false, got {values[key]!r}")
    if "cpus" in values:
        values["cpus"] = parse_cpu_list(values["cpus"])
        check_available(values["cpus"])
        # One job per CPU it may use, as without the setting.
        values.setdefault("concurrency", len(values["cpus"]))
    if "max_limits" in values:
        raw = values["max_limits"]
        if not isinstance(raw, Mapping):
            raise errors.ConfigError("worker: max_limits must be a table of limits")
        try:
            values["max_limits"] = parse_limits(raw)
        except LimitsInvalid as exc:
            raise errors.ConfigError(f"worker: max_limits: {exc}") from exc
    try:
        return replace(WorkerSettings(), **values)
    except TypeError as exc:
        raise errors.ConfigError(f"worker: {exc}") from exc


def _names(key: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if isinstance(raw, list | tuple) and all(isinstance(item, str) for item in raw):
        return tuple(raw)
    raise errors.ConfigError(f"worker: {key} must be a list of names, got {raw!r}")
