"""A small tmpfs of a test's own, to fill up or to make read-only (needs root).

The test mounts it inside its own temporary directory and it is unmounted on
the way out, whatever happened; a filesystem still in use is unmounted lazily
so that a failed test never leaves a mount behind.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_MOUNT_TIMEOUT = 30.0


class SmallFilesystem:
    """A mounted tmpfs: fill it, free it, make it read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        """Write a file until the filesystem has no space left."""
        with self.filler.open("ab", buffering=0) as out:
            chunk = b"\0" * 65536
            while True:
                try:
                    out.write(chunk)
                except OSError:
                    break
            # The last few bytes a partial page may still take.
            with suppress(OSError):
                while out.write(b"\0"):
                    pass

    def free(self) -> None:
        """Delete what :meth:`fill` wrote."""
        self.filler.unlink(missing_ok=True)

    def remount_read_only(self) -> None:
        _run("mount", "-o", "remount,ro", str(self.path))


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=_MOUNT_TIMEOUT)


@contextmanager
def small_filesystem(path: Path, size: str = "4m") -> Iterator[SmallFilesystem]:
    """A tmpfs of ``size`` mounted at ``path`` (made if missing) for the duration."""
    if os.geteuid() != 0:
        raise RuntimeError("mounting a tmpfs for this test needs root")
    path.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield SmallFilesystem(path)
    finally:
        try:
            _run("umount", str(path))
        except subprocess.CalledProcessError:
            _run("umount", "-l", str(path))  # still busy: detach now, freed when let go
