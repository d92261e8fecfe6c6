"""A module of ``--modules`` missing from a package that imports: the worker names the package
and its modules nearest to the name, not where to run it from, which was right."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from taskq import errors
from taskq.worker.module_check import ModuleCheck
from taskq.worker.sandbox.environment import job_environment

PACKAGE_MODULES = ("lab.py", "labs.py", "thumbs.py", "images/__init__.py")


@pytest.fixture
def package_folder(tmp_path: Path) -> Path:
    """A folder holding the package mypkg, as a newcomer's project does: mypkg imports."""
    (tmp_path / "mypkg" / "images").mkdir(parents=True)
    for name in ("__init__.py", *PACKAGE_MODULES):
        (tmp_path / "mypkg" / name).write_text("")
    return tmp_path


def refusal(modules: list[str], folder: Path) -> str:
    """What the worker says, started from ``folder`` with PYTHONPATH=."""
    check = ModuleCheck.in_own_child(
        modules, import_path=[str(folder), *sys.path], env=job_environment(os.environ)
    )
    with pytest.raises(errors.ConfigError) as refused:
        check.wait()
    return str(refused.value)


def test_a_typo_in_a_module_of_a_package_is_told_with_the_nearest_modules(
    package_folder: Path,
) -> None:
    assert refusal(["mypkg.labb"], package_folder) == (
        "cannot import --modules: mypkg.labb: mypkg has no module labb; "
        "did you mean mypkg.lab or mypkg.labs?"
    )


def test_a_missing_package_in_a_package_is_told_so(package_folder: Path) -> None:
    assert refusal(["mypkg.image.resize"], package_folder) == (
        "cannot import --modules: mypkg.image.resize: mypkg has no module image; "
        "did you mean mypkg.images?"
    )


def test_with_no_name_near_the_packages_modules_are_listed(package_folder: Path) -> None:
    assert refusal(["mypkg.zzz"], package_folder) == (
        "cannot import --modules: mypkg.zzz: mypkg has no module zzz; "
        "its modules: images, lab, labs, thumbs"
    )


def test_a_name_below_a_module_is_told_that_the_module_is_no_package(
    package_folder: Path,
) -> None:
    assert refusal(["mypkg.lab.resize"], package_folder) == (
        "cannot import --modules: mypkg.lab.resize: mypkg.lab is a module, not a package: "
        "it holds no module resize"
    )
