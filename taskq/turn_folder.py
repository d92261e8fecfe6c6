"""The user's own folder for the lock files that taskq's processes take turns on.

Idle workers of one cluster look for work in turn (``look_turns.cluster_turns``),
and workers of one store start in turn (``worker.start_turns``), each through
a lock file here. The folder is the user's runtime folder
(``$XDG_RUNTIME_DIR/taskq``), or where there is none ``turns`` in the user's
cache folder: not the temporary folder, which a job's own files share. It
must be the user's alone, as another user able to take a lock could hold
every turn up to its bound; where it is not, no turns are taken.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def turn_folder() -> Path | None:
    """The folder, made if need be; None where it cannot be, or others may enter it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        folder = Path(runtime) / "taskq"
    else:
        # Imported here: with a runtime folder, as a login session has, it is not needed.
        import platformdirs

        folder = Path(platformdirs.user_cache_dir("taskq")) / "turns"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        state = folder.stat()
    except OSError:
        return None
    if state.st_uid != os.getuid() or state.st_mode & 0o077:
        return None
    return folder


def try_lock(fd: int) -> bool | None:
    """Take the lock on ``fd`` if it is free: True if taken, None while another
    holds it, False where the filesystem has no ``flock`` (no turns to take)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None
    except OSError:
        return False
    return True
