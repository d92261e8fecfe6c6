"""The few Linux process controls the sandbox needs that Python's standard library lacks.

``prctl`` through ctypes: the parent-death signal (a process learns of its
parent's death at once, from the kernel) and the child subreaper flag (a
process that double-forks and calls ``setsid`` is re-parented to the nearest
subreaper instead of to init, so it stays findable). And the list of a
process's own children, from ``/proc``.
"""

from __future__ import annotations

import ctypes
import os

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

# The C library is already loaded into every Python process: its symbols are
# found through the process's own handle. ``ctypes.util.find_library`` would
# run ``ldconfig -p`` in a subprocess, in every sandbox child as it starts.
_libc = ctypes.CDLL(None, use_errno=True)


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
