"""The few Linux process controls the sandbox needs that Python's standard library lacks.

``prctl`` through ctypes: the parent-death signal (a process learns of its
parent's death at once, from the kernel) and the child subreaper flag (a
process that double-forks and calls ``setsid`` is re-parented to the nearest
subreaper instead of to init, so it stays findable); giving up a capability
(``capset``). And, from ``/proc``, a process's children and the CPU time of
everything below it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_CAPABILITY_VERSION_3 = 0x20080522
CAP_SYS_RESOURCE = 24
"""Lets a process raise a hard rlimit (and ignore RLIMIT_NPROC)."""
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")

# The C library is already loaded into every Python process: its symbols are
# found through the process's own handle. ``ctypes.util.find_library`` would
# run ``ldconfig -p`` in a subprocess, in every sandbox child as it starts.
_libc = ctypes.CDLL(None, use_errno=True)


class _CapabilityHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapabilitySets(ctypes.Structure):
    """32 capabilities of each set: version 3 takes two of these."""

    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def set_parent_death_signal(signal_number: int) -> None:
    """Have the kernel send ``signal_number`` to this process when its parent dies.

    The "parent" is the thread that started this process: a process started
    from a thread that then exits gets the signal although its parent process
    lives on, which is why the worker starts children from one thread kept
    for its whole life. Cleared in children this process forks.
    """
    _prctl(_PR_SET_PDEATHSIG, signal_number)


def become_subreaper() -> None:
    """Adopt this process's orphaned descendants, wherever they moved (``setsid``)."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def drop_capability(number: int) -> None:
    """Give up capability ``number`` for good, in this process and whatever it executes.

    First from the bounding set, which needs CAP_SETPCAP: a process running
    as root regains every capability of that set when it executes a program.
    A process without CAP_SETPCAP is not root, and gains capabilities by
    executing only from file capabilities or a set-user-ID program. Then
    from the effective, permitted and inheritable sets (the ambient set,
    which must lie within them, follows).
    """
    if _libc.prctl(_PR_CAPBSET_READ, ctypes.c_ulong(number), 0, 0, 0) == 1:
        with contextlib.suppress(PermissionError):
            _prctl(_PR_CAPBSET_DROP, number)
    header = _CapabilityHeader(_CAPABILITY_VERSION_3, 0)
    sets = (_CapabilitySets * 2)()
    if _libc.capget(ctypes.byref(header), sets) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"capget: {os.strerror(errno)}")
    word, bit = sets[number // 32], 1 << (number % 32)
    if not (word.effective | word.permitted | word.inheritable) & bit:
        return
    word.effective &= ~bit
    word.permitted &= ~bit
    word.inheritable &= ~bit
    if _libc.capset(ctypes.byref(header), sets) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"capset: {os.strerror(errno)}")


def descendants_cpu_seconds(pid: int) -> float:
    """CPU time of every process below ``pid``, with that of the children they waited for.

    Each process's ``stat`` is read before its children are listed: a child
    its parent reaps in between is then missed by this reading (the next
    one finds it in the parent's figures), never counted twice. A child
    reaped without a wait (its parent ignores SIGCHLD) takes its time with it.
    """
    ticks = 0
    waiting = _children_of_every_thread(pid)
    while waiting:
        below = waiting.pop()
        try:
            with open(f"/proc/{below}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone: reaped by now, and counted by its parent
        # utime, stime, cutime, cstime: fields 14 to 17 of proc_pid_stat(5).
        ticks += sum(int(field) for field in fields[11:15])
        waiting.extend(_children_of_every_thread(below))
    return ticks / _TICKS_PER_SECOND


def _children_of_every_thread(pid: int) -> list[int]:
    """``pid``'s children, whichever of its threads started them."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                found.extend(int(word) for word in children.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{task}"):
                continue  # the thread ended
            return _children_by_scan(pid)  # a kernel without CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return found


def own_children() -> list[int]:
    """The pids of this single-threaded process's children, running or not yet reaped."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as children:
            return [int(word) for word in children.read().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN
        return _children_by_scan(pid)


def _children_by_scan(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(entry))
    return found
