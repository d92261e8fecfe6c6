"""A file given to ``--modules``: the worker names the module that file imports as, packages
and all, so that following its advice publishes the names the jobs are submitted by."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from taskq import errors
from taskq.worker.module_check import ModuleCheck
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.settings import file_as_module, settings_from

ADVICE = "worker: modules: '{0}' is a file; modules takes module names: --modules "
JOB = "import taskq\n\n@taskq.job\ndef f(x: int) -> int:\n    return x\n"


def advice(given: str) -> str:
    """What the worker says of ``--modules given``, after the words every refusal of a file has."""
    with pytest.raises(errors.ConfigError) as refused:
        settings_from({"modules": given})
    said = str(refused.value)
    assert said.startswith(ADVICE.format(given)), said
    return said.removeprefix(ADVICE.format(given))


def write(root: Path, *files: str) -> None:
    for file in files:
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text(JOB if file.endswith("lab.py") else "")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the worker is started from: not on its import path unless a test puts it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_file_in_a_package_is_told_by_its_dotted_name(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project, "mypkg/__init__.py", "mypkg/lab.py")
    assert advice("mypkg/lab.py") == (
        "mypkg.lab, run from the folder that holds mypkg with PYTHONPATH=."
    )
    # Already started so (PYTHONPATH=.): the name alone.
    monkeypatch.syspath_prepend(str(project))
    assert advice("mypkg/lab.py") == "mypkg.lab"


def test_the_packages_are_taken_up_to_the_first_folder_that_is_none(project: Path) -> None:
    write(project, "mypkg/__init__.py", "mypkg/images/__init__.py", "mypkg/images/lab.py")
    assert advice("mypkg/images/lab.py") == (
        "mypkg.images.lab, run from the folder that holds mypkg with PYTHONPATH=."
    )
    # The "src" layout: src is no package, and the packages import from it.
    write(project, "src/mypkg/__init__.py", "src/mypkg/lab.py")
    assert advice("src/mypkg/lab.py") == "mypkg.lab, with src on the import path (PYTHONPATH=src)"
    assert advice(str(project / "src/mypkg/lab.py")) == (
        "mypkg.lab, with src on the import path (PYTHONPATH=src)"
    )


def test_a_plain_folder_below_the_import_path_is_told_as_the_namespace_package_it_imports_as(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    write(project, "mypkg/lab.py")
    monkeypatch.syspath_prepend(str(project))
    assert advice("mypkg/lab.py") == "mypkg.lab"
    # Unless a package of its name comes first on the path: then mypkg.lab is another's.
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write(elsewhere, "mypkg/__init__.py")
    told = file_as_module("mypkg/lab.py", [str(elsewhere), str(project)])
    assert told.endswith("--modules lab, with mypkg on the import path (PYTHONPATH=mypkg)")


def test_following_the_advice_publishes_the_names_jobs_are_submitted_by(project: Path) -> None:
    write(project, "mypkg/__init__.py", "mypkg/lab.py")
    told = advice("mypkg/lab.py")
    module = told.partition(",")[0]
    # Started as told, from here: PYTHONPATH=FOLDER puts that folder first on the path.
    folder = told.rpartition("PYTHONPATH=")[2].rstrip(")")
    import_path = [str((project / folder).resolve()), *sys.path]
    declared = ModuleCheck.in_own_child(
        [module], import_path=import_path, env=job_environment(os.environ)
    ).wait()
    assert [each.name for each in declared] == ["mypkg.lab:f"]
