"""Control groups for sandbox children: a process cap and a memory bound per job, when allowed.

Where the machine lets the worker make control groups (it runs as root, or
holds a delegated subtree), each sandbox child's job process runs in groups
of its own, made by its keeper under ``taskq-<worker pid>``:

- ``pids.max`` caps the processes (and threads) of the job's whole tree at
  ``limits.processes``: a fork bomb stops at its cap;
- ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1) holds the whole tree's
  resident memory to ``limits.memory_bytes``, where RLIMIT_AS bounds each
  process's address space alone;
- v2's ``cgroup.kill`` ends every process in the group at once;
- the group's CPU counter (v2's ``cpu.stat``, in every v2 group, or v1's
  ``cpuacct.usage``) is how the keeper measures the job's CPU time, with
  that of processes that ended unwaited for.

cgroup v2 serves a controller it delegates to the worker; on a machine with
v2 mounted beside v1 controllers (hybrid), v1's ``pids``, ``memory`` and
``cpuacct`` hierarchies do. With neither, nothing caps a job's processes (RLIMIT_NPROC
counts every process of the user, not of a job, and binds no root process)
and RLIMIT_AS alone bounds its memory, per process; the worker's start-up
line says which holds (``describe``).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from taskq.broker.limits import Limits

# Paths are strings, not pathlib's, and the plan is no msgspec Struct: a
# sandbox child's keeper imports this before it splits from its job process
# (see ``keeper``), and what it imports then counts twice (pathlib's import
# was about 4 ms of a child's 55 ms of imports, msgspec's is 25).
_PROC_MOUNTS = "/proc/self/mountinfo"
_PROC_CGROUP = "/proc/self/cgroup"


class Group(NamedTuple):
    """Where one controller's groups are made, and in which cgroup version."""

    parent: str
    version: int


class CgroupPlan(NamedTuple):
    """The groups a sandbox child's keeper makes for its job process, by purpose."""

    pids: Group | None = None
    memory: Group | None = None
    kill: Group | None = None
    """A v2 group, for ``cgroup.kill`` (any v2 group has it, controllers or not)."""
    cpu: Group | None = None
    """Where the job's CPU time is counted: a v2 group, else v1's ``cpuacct``."""

    def groups(self) -> list[Group]:
        chosen = (self.pids, self.memory, self.kill, self.cpu)
        return list({group.parent: group for group in chosen if group is not None}.values())

    def to_json(self) -> str:
        """The plan for a child's command line, where :meth:`from_json` reads it."""
        return json.dumps(self)

    @classmethod
    def from_json(cls, text: str) -> CgroupPlan:
        return cls(*(None if group is None else Group(*group) for group in json.loads(text)))


def create(worker_pid: int) -> CgroupPlan:
    """Make ``taskq-<worker_pid>`` where the worker may, and say where each job's groups go."""
    v2_mount, v1_mounts = _mounts()
    own = _own_paths()
    unified: Group | None = None
    v2_controllers: set[str] = set()
    if v2_mount is not None and "" in own:
        parent = _make(os.path.join(v2_mount, own[""].lstrip("/"), f"taskq-{worker_pid}"))
        if parent is not None:
            unified = Group(parent, 2)
            available = _read(os.path.join(parent, "cgroup.controllers")).split()
            for controller in ("pids", "memory"):
                if controller in available and _write(
                    os.path.join(parent, "cgroup.subtree_control"), f"+{controller}"
                ):
                    v2_controllers.add(controller)
    chosen: dict[str, Group | None] = {}
    # v2 counts CPU time in every group; v1 only in the cpuacct hierarchy.
    for controller in ("pids", "memory", "cpuacct"):
        in_v2 = controller in v2_controllers or (controller == "cpuacct" and unified is not None)
        chosen[controller] = unified if in_v2 else None
        if chosen[controller] is None and controller in v1_mounts and controller in own:
            path = os.path.join(
                v1_mounts[controller], own[controller].lstrip("/"), f"taskq-{worker_pid}"
            )
            made = _make(path)
            chosen[controller] = Group(made, 1) if made is not None else None
    return CgroupPlan(
        pids=chosen["pids"], memory=chosen["memory"], kill=unified, cpu=chosen["cpuacct"]
    )


def describe(plan: CgroupPlan) -> str:
    """One line for the worker's start-up log: what bounds a job's processes and memory."""

    def where(group: Group | None, fallback: str) -> str:
        if group is None:
            return fallback
        return f"cgroup v{group.version} ({group.parent})"

    return (
        f"processes capped by {where(plan.pids, 'nothing (no cgroup pids controller)')}; "
        f"memory by {where(plan.memory, 'RLIMIT_AS only (address space, per process)')}; "
        f"CPU counted by {where(plan.cpu, 'the job process tree in /proc')}; "
        f"kill by {'cgroup.kill' if plan.kill else 'process group and subreaper sweep'}"
    )


def remove(plan: CgroupPlan) -> None:
    """Remove the worker's ``taskq-<pid>`` groups (those its keepers left empty)."""
    for group in plan.groups():
        with contextlib.suppress(OSError):
            os.rmdir(group.parent)


def sweep_left_behind(plan: CgroupPlan) -> list[str]:
    """Remove the ``taskq-<pid>`` groups beside this worker's whose worker is gone; the removed.

    A worker removes its own groups when it stops, but one killed outright
    (SIGKILL, a machine's power) cannot, and each left behind stays until the
    machine restarts: a year of killed workers is thousands. A group is taken
    for left behind when no process has its pid. ``rmdir`` removes only a
    group that holds no process, so no running job loses its group; only a
    worker of another pid namespace sharing this group (containers have
    cgroup namespaces of their own) could lose the groups it holds empty.
    """
    own = {os.path.basename(group.parent) for group in plan.groups()}
    removed: list[str] = []
    for folder in {os.path.dirname(group.parent) for group in plan.groups()}:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            pid = name.removeprefix("taskq-")
            if name in own or pid == name or not pid.isdigit() or _alive(int(pid)):
                continue
            if _remove_tree(os.path.join(folder, name)):
                removed.append(os.path.join(folder, name))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: there, at least
    return True


def _remove_tree(path: str) -> bool:
    """Remove a group and the groups under it, deepest first; whether it is gone."""
    for folder, _, _ in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    return not os.path.exists(path)


class JobGroups:
    """A keeper's groups for its job process: made before the fork; the keeper moves the job in."""

    def __init__(self, plan: CgroupPlan, keeper_pid: int) -> None:
        self._plan = plan
        self._applied: tuple[int, int] | None = None
        self._paths: dict[str, str] = {}
        for group in plan.groups():
            made = _make(os.path.join(group.parent, f"keeper-{keeper_pid}"))
            if made is not None:
                self._paths[group.parent] = made

    def join(self, pid: int) -> None:
        """Move process ``pid`` (the job process, before any job) into the groups."""
        for path in self._paths.values():
            _write(os.path.join(path, "cgroup.procs"), str(pid))

    def apply(self, limits: Limits) -> None:
        """Set the next job's process cap and memory bound (from the job process)."""
        bounds = (limits.processes, limits.memory_bytes)
        if bounds == self._applied:
            return  # a pool child's jobs nearly all share their limits: no writes then
        self._applied = bounds
        pids = self._path_of(self._plan.pids)
        if pids is not None:
            _write(os.path.join(pids, "pids.max"), str(limits.processes))
        memory = self._path_of(self._plan.memory)
        if memory is not None and self._plan.memory is not None:
            name = "memory.max" if self._plan.memory.version == 2 else "memory.limit_in_bytes"
            _write(os.path.join(memory, name), str(limits.memory_bytes))

    def cpu_seconds(self) -> float | None:
        """CPU seconds used in the job's group so far; ``None`` without one, or unreadable."""
        cpu = self._path_of(self._plan.cpu)
        if cpu is None or self._plan.cpu is None:
            return None
        if self._plan.cpu.version == 1:
            usage = _read(os.path.join(cpu, "cpuacct.usage")).strip()
            return int(usage) / 1e9 if usage else None
        for line in _read(os.path.join(cpu, "cpu.stat")).splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec":
                return int(value) / 1e6
        return None

    def kill(self) -> None:
        """Kill every process in the job's v2 group at once, where there is one."""
        kill = self._path_of(self._plan.kill)
        if kill is not None:
            _write(os.path.join(kill, "cgroup.kill"), "1")

    def remove(self) -> None:
        """Remove the groups, once every process in them has been reaped."""
        for path in self._paths.values():
            with contextlib.suppress(OSError):
                os.rmdir(path)

    def _path_of(self, group: Group | None) -> str | None:
        return None if group is None else self._paths.get(group.parent)


def _mounts() -> tuple[str | None, dict[str, str]]:
    """The cgroup v2 mount point, and v1's by controller, from /proc/self/mountinfo."""
    v2: str | None = None
    v1: dict[str, str] = {}
    for line in _read(_PROC_MOUNTS).splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2" and v2 is None:
            v2 = fields[4]
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in ("pids", "memory", "cpuacct"):
                    v1.setdefault(option, fields[4])
    return v2, v1


def _own_paths() -> dict[str, str]:
    """This process's group path by controller; ``""`` for v2's."""
    paths = {}
    for line in _read(_PROC_CGROUP).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _make(path: str) -> str | None:
    try:
        os.mkdir(path)
    except FileExistsError:
        return path if os.path.isdir(path) else None
    except OSError:
        return None
    return path


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as file:
            file.write(text)
    except OSError:
        return False
    return True
