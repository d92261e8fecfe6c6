"""Importing a worker's ``--modules`` once at start, so that a typo stops it there, not per job.

The import runs where the jobs run, with their environment and import path
(``taskq.worker.sandbox.module_imports``): in the worker's first pool child,
which imports them as it starts anyway, or in process isolation in a child
Python of its own. Module code never runs in the worker, which holds the
store's URL and credentials, and a module that imports there imports for the
jobs too. The report names, for each module, the error that importing it
raised, if any, and the ``@taskq.job`` declarations it holds, which the
worker publishes (``taskq.worker.publishing``).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from taskq import errors
from taskq.worker.sandbox.child_process import ChildProcess
from taskq.worker.settings import file_as_module

if TYPE_CHECKING:
    from taskq.broker.ops.functions import Declaration

IMPORT_TIMEOUT_SECONDS = 120.0
_READ_BYTES = 65536
# The modules of a package named when none is close to a name it lacks: a line, not a screen.
_MODULES_SHOWN = 12


class ModuleReport(msgspec.Struct, frozen=True):
    """What importing one module gave: ``error`` names what it raised (``""``: nothing),
    ``missing`` the module, or a package it is in, not found on the import path (``""``:
    none, or only a module it imports), ``package`` the package of ``missing`` when that
    imported (``""``: none did), with ``package_modules`` the names of the modules it holds
    (None: it is a module, not a package), ``jobs`` the declared jobs it holds
    (``Declaration``, as JSON)."""

    module: str
    error: str = ""
    missing: str = ""
    package: str = ""
    package_modules: list[str] | None = None
    jobs: list[dict[str, Any]] = []


class ModuleCheck:
    """The import of a worker's ``--modules`` under way in a child; ``wait`` gives its verdict.

    Started before the worker imports its own heavy parts (its loop, the
    store's drivers), so that the two overlap: a worker's start-up counts
    towards the first job's wait.
    """

    def __init__(
        self,
        modules: Sequence[str],
        report: Callable[[float], tuple[bytes, str]],
        *,
        timeout: float = IMPORT_TIMEOUT_SECONDS,
    ) -> None:
        """``report(seconds)``: the child's output that ends with the report, and what the
        child said should there be none; TimeoutError after ``seconds``."""
        self._modules = list(modules)
        self._report = report
        self._timeout = timeout
        self._started = time.monotonic()

    @classmethod
    def none(cls) -> ModuleCheck:
        """No modules to import: nothing to wait for."""
        return cls([], lambda _: (b"", ""))

    @classmethod
    def in_own_child(
        cls,
        modules: Sequence[str],
        *,
        import_path: Sequence[str],
        env: Mapping[str, str],
        timeout: float = IMPORT_TIMEOUT_SECONDS,
    ) -> ModuleCheck:
        """The modules imported by a child Python started for that alone (process isolation)."""
        child = subprocess.Popen(
            [
                # -P, as for every sandbox child (``child_process``).
                *(sys.executable, "-P", "-m", "taskq.worker.sandbox.module_imports"),
                *(msgspec.json.encode(list(import_path)).decode(), *modules),
            ],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def report(seconds: float) -> tuple[bytes, str]:
            try:
                stdout, stderr = child.communicate(timeout=seconds)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                raise TimeoutError from None
            return stdout, _last_words(stderr) or f"exit status {child.returncode}"

        return cls(modules, report, timeout=timeout)

    @classmethod
    def in_pool_child(
        cls,
        modules: Sequence[str],
        report_fd: int,
        child: ChildProcess,
        *,
        timeout: float = IMPORT_TIMEOUT_SECONDS,
    ) -> ModuleCheck:
        """The modules imported by a pool child as it starts, its report on ``report_fd``.

        ``report_fd`` is the pipe's end to read (closed here); ``child`` the
        pool child started with the other, which the worker keeps for its jobs.
        """

        def report(seconds: float) -> tuple[bytes, str]:
            try:
                read = _read_to_end(report_fd, seconds)
            finally:
                os.close(report_fd)
            if read:
                return read, ""
            # Ended before it could say: its last words are on its output pipe.
            try:
                output = os.read(child.output_fd, _READ_BYTES)
            except OSError:
                output = b""
            return b"", _last_words(output) or "its child ended before it could tell"

        return cls(modules, report, timeout=timeout)

    def wait(self) -> list[Declaration]:
        """Wait for the import; the modules' declared jobs, or ConfigError naming what fails."""
        if not self._modules:
            return []
        named = ",".join(self._modules)
        left = self._timeout - (time.monotonic() - self._started)
        try:
            output, said = self._report(max(left, 0.0))
        except TimeoutError:
            raise errors.ConfigError(
                f"importing --modules {named} took more than {self._timeout:g} s"
            ) from None
        except OSError as exc:
            raise errors.ConfigError(f"importing --modules {named} failed: {exc}") from None
        try:
            reports = msgspec.json.decode(output.splitlines()[-1], type=list[ModuleReport])
        except (IndexError, msgspec.DecodeError):
            raise errors.ConfigError(f"importing --modules {named} failed: {said}") from None
        failed = [_failure(report) for report in reports if report.error]
        if failed:
            # Where to run helps only when a package is not found at all.
            missing = [
                report.missing
                for report in reports
                if report.missing and not report.package and not _a_file(report)
            ]
            raise errors.ConfigError(
                "cannot import --modules: " + "; ".join(failed) + _where_to_run(missing)
            )
        jobs = [job for report in reports for job in report.jobs]
        if not jobs:
            return []
        # Imported by the modules that declare jobs alone: the check is started
        # first thing, and a worker's start-up counts towards its first jobs' wait.
        from taskq.broker.ops.functions import Declaration

        return one_per_name(msgspec.convert(jobs, list[Declaration]))


def one_per_name(declared: Iterable[Declaration]) -> list[Declaration]:
    """The declarations of several modules' jobs, one a name, in the order first seen.

    A module that imports another's job holds it too, and lists it (as a
    package's ``__init__`` that imports its modules' jobs must): each module
    describes the same function alike. Used wherever declarations of
    modules are joined: the worker's ``--modules``, ``taskq.testing``.
    """
    return list({each.name: each for each in declared}.values())


def undeclared_queues(declarations: Sequence[Declaration], queues: Sequence[str]) -> list[str]:
    """The queues the declared jobs go to that are not among ``queues``, in order of first
    declaration: their jobs wait for another worker."""
    declared = (str(each.options.get("queue") or "default") for each in declarations)
    return [queue for queue in dict.fromkeys(declared) if queue not in queues]


def _failure(report: ModuleReport) -> str:
    """Why ``report``'s module did not import, and, for a file's name, the module meant."""
    if _a_file(report):
        # Not "No module named 'thumbs.py'; 'thumbs' is not a package": the next step.
        return f"{report.module}: {file_as_module(report.module, sys.path)}"
    if report.package:
        # Not "No module named 'mypkg.labb'", and no advice on where to run: mypkg was found.
        return f"{report.module}: {_not_in_package(report)}"
    return f"{report.module}: {report.error}"


def _not_in_package(report: ModuleReport) -> str:
    """``mypkg has no module labb``, and the modules of mypkg nearest to what was asked."""
    package, name = report.package, report.missing.removeprefix(f"{report.package}.")
    if report.package_modules is None:
        return f"{package} is a module, not a package: it holds no module {name}"
    said = f"{package} has no module {name}"
    import difflib  # only a refusal needs it

    close = difflib.get_close_matches(name, report.package_modules, n=3)
    if close:
        return f"{said}; did you mean {' or '.join(f'{package}.{each}' for each in close)}?"
    if not report.package_modules:
        return f"{said}; it holds no modules"
    shown = report.package_modules[:_MODULES_SHOWN]
    more = len(report.package_modules) - len(shown)
    return f"{said}; its modules: {', '.join(shown)}" + (f" and {more} more" if more else "")


def _a_file(report: ModuleReport) -> bool:
    """Whether the module that failed to import was named as a Python file (``thumbs.py``)."""
    return bool(report.error) and report.module.endswith(".py")


def _where_to_run(missing: Sequence[str]) -> str:
    """The next step when the modules named, or their packages, are not on the import path."""
    if not missing:
        return ""
    packages = ", ".join(dict.fromkeys(name.partition(".")[0] for name in missing))
    return (
        f"; the worker imports from its sys.path: run it from the folder that holds {packages} "
        f"with PYTHONPATH=. (or install {packages} into the worker's environment)"
    )


def _read_to_end(fd: int, seconds: float) -> bytes:
    """What ``fd`` gives until its end; TimeoutError after ``seconds``."""
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            raise TimeoutError
        chunk = os.read(fd, _READ_BYTES)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _last_words(output: bytes) -> str:
    """The last line a failed child wrote (``""``: none)."""
    lines = output.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""
