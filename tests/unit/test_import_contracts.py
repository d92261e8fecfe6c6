"""The layering contracts of pyproject.toml hold, and a wrong-way import breaks them.

Each wrong-way case copies taskq's sources to a temporary folder, adds one
import that crosses a layer the wrong way, and runs lint-imports there on the
project's own contracts (those about taskq alone).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH first, so the copy is what grimp reads, not the installed taskq.
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *only],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _ini_value(value: Any) -> str:
    if isinstance(value, list):
        return "".join(f"\n    {item}" for item in value)
    return str(value)


def _taskq_contracts() -> str:
    """The project's contracts about taskq alone, as an .importlinter (INI) file."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]", f"root_packages = {_ini_value(['taskq'])}"]
    for contract in config["contracts"]:
        named = [
            value
            for key, value in contract.items()
            if key in {"containers", "modules", "source_modules", "forbidden_modules"}
        ]
        if any(not module.startswith("taskq") for group in named for module in group):
            continue
        lines.append(f"[importlinter:contract:{contract['id']}]")
        lines += [f"{key} = {_ini_value(value)}" for key, value in contract.items() if key != "id"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of taskq's Python sources with the contracts; each test adds to its own copy."""
    base = tmp_path_factory.mktemp("contracts")
    shutil.copytree(
        ROOT / "taskq",
        base / "taskq",
        ignore=lambda folder, names: [
            name for name in names if not (name.endswith(".py") or (Path(folder) / name).is_dir())
        ],
    )
    (base / ".importlinter").write_text(_taskq_contracts())
    return base


def test_the_project_keeps_its_contracts() -> None:
    checked = _lint_imports(ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout


def test_the_copy_keeps_them_before_a_wrong_way_import(tree: Path) -> None:
    checked = _lint_imports(tree)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert " 0 broken." in checked.stdout, checked.stdout


@pytest.mark.parametrize(
    ("module", "wrong_way", "contract"),
    [
        # A store that reaches up into the operations above it.
        ("broker/stores/store.py", "from taskq.broker.ops import plan", "broker-layers"),
        # The broker that imports a user of it.
        ("broker/records.py", "import taskq.worker.settings", "layers"),
        # The worker and the console side by side: neither imports the other.
        ("worker/heartbeat.py", "import taskq.app.states", "side-by-side"),
        # The console past the client, straight to an operation.
        ("app/states.py", "import taskq.broker.ops.jobs", "through-the-client"),
    ],
)
def test_an_import_the_wrong_way_breaks_a_contract(
    tree: Path, tmp_path: Path, module: str, wrong_way: str, contract: str
) -> None:
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy)
    target = copy / "taskq" / module
    target.write_text(target.read_text() + f"\n{wrong_way}  # the wrong way\n")

    checked = _lint_imports(copy, contract)

    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "Contracts: 0 kept, 1 broken." in checked.stdout, checked.stdout
    # The report names the import added, in the copy.
    assert f"taskq.{module.removesuffix('.py').replace('/', '.')} ->" in checked.stdout
