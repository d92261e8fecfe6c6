"""A module that is here but does not import: it needs a package nobody installs.

A submit naming a job in it must say why it cannot import, not that the
name is unknown.
"""

from __future__ import annotations

import taskq_tests_missing_dependency  # type: ignore[import-not-found]  # noqa: F401


def resize(path: str) -> str:
    return path
