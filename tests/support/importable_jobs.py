"""Plain functions that no worker declares, for submits by a name the test's process imports.

Each function is used by one test only: a declaration stored for it on the
shared rqlite cluster would reach every test that submits it.
"""

from __future__ import annotations

from tests.support.jobs import echo

__all__ = ["echo"]  # imported under this module's name: not a job of this module


def resize(path: str, width: int = 800) -> str:
    """Resize an image (a stand-in: returns what it would write)."""
    return f"{path}@{width}"


def resize_declared(path: str, width: int = 800) -> str:
    """The same, for the test where a worker's declaration of it wins."""
    return f"{path}@{width}"


def resize_unimported(path: str) -> str:
    """The same, for clients that must not look names up among their imports."""
    return path


def resize_over_http(path: str) -> str:
    """The same, for the server, which never imports what a name says."""
    return path
