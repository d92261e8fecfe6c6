"""Every install hint installs from taskq's checkout, never a package by name.

The distribution is named taskq, as its import package and commands are (and
as tools that ask for its version by name expect), but ``taskq`` on PyPI is
an unrelated project: a hint naming a package would install the wrong thing.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# pip install 'NAME[extra]' or pip install NAME[extra], in prose, code or TOML comments.
HINT = re.compile(r"pip install '?([A-Za-z0-9_.\-]+)\[")


def _distribution() -> str:
    with (REPO / "pyproject.toml").open("rb") as pyproject:
        name: str = tomllib.load(pyproject)["project"]["name"]
    return name


def _hinted_files() -> list[Path]:
    return [
        REPO / "README.md",
        REPO / "CONTRIBUTING.md",
        REPO / "config.example.toml",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "taskq").rglob("*.py")),
    ]


def test_the_distribution_is_named_as_its_package() -> None:
    assert _distribution() == "taskq"


def test_every_install_hint_names_the_checkout() -> None:
    wanted = {"."}
    hints = {
        (path.relative_to(REPO).as_posix(), name)
        for path in _hinted_files()
        for name in HINT.findall(path.read_text())
    }
    assert hints, "no install hint found: the pattern no longer matches the docs"
    assert {hint for hint in hints if hint[1] not in wanted} == set()


def test_the_dev_extra_pulls_this_distributions_own_extras() -> None:
    with (REPO / "pyproject.toml").open("rb") as pyproject:
        dev = tomllib.load(pyproject)["project"]["optional-dependencies"]["dev"]
    own = [requirement for requirement in dev if "[" in requirement]
    assert own
    assert all(requirement.startswith(f"{_distribution()}[") for requirement in own)
