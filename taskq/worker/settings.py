"""A worker's settings: the config file's [worker] section, then command-line flags.

Each setting's type and range is declared once, on :class:`WorkerSettings`,
with its ``taskq-worker`` flag if it has one (:class:`Flag`, from which the
command's parser is built); msgspec checks values against them, and
``taskq.config.converted`` tells a fault as one line naming the setting, so
a typo stops the worker at start rather than leaving it running with a
default. ``cpus`` and ``max_limits`` are written as text ("0-3", "2GiB") and
parsed by their own modules first.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from msgspec import Meta

from taskq import errors, humanize
from taskq.broker import worker_policy
from taskq.broker.limits import FORMS, Limits, LimitsInvalid, parse_limits, parse_size
from taskq.broker.worker_policy import Policy
from taskq.config import closest_known, converted
from taskq.worker.cpus import check_available, parse_cpu_list

Isolation = Literal["pool", "process"]
ISOLATION_MODES: tuple[str, ...] = get_args(Isolation)
# The default most jobs claimed ahead, for workers of up to 16 slots (see most_prefetch).
_LEAST_DEFAULT_PREFETCH = 256
# How the worker writes its event lines: for people, or for log collectors.
LOG_FORMATS = ("text", "json")

Name = Annotated[str, Meta(min_length=1)]
_MODULE_NAME = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*"
_MODULE_NAME_RE = re.compile(_MODULE_NAME)
ModuleName = Annotated[str, Meta(pattern=f"^{_MODULE_NAME}$", description="a module name")]
AtLeastOne = Annotated[int, Meta(ge=1)]
# Finite: a lease or a grace of inf seconds would never end.
Seconds = Annotated[
    float, Meta(gt=0, le=sys.float_info.max, description="a positive, finite number of seconds")
]

# Settings a flag or the file may give as one comma-separated string.
_NAME_LISTS = ("queues", "labels", "modules", "env_passthrough")
# Settings written as sizes ("6GiB") in a config file or a flag.
_SIZES = ("memory_budget", "output_keep_bytes")


class Flag(msgspec.Struct, frozen=True):
    """A setting's flag on ``taskq-worker``: ``--`` and the setting's name, dashed.

    Declared on the setting (``Annotated[..., Flag(...)]``), so a new setting
    is declared once and :func:`setting_flags` finds its flag. The flag's text
    goes to :func:`settings_from` as the config file's value would (a
    comma-separated list, a size, "MIN,MAX"), or what ``parse`` makes of it;
    ``parse`` is argparse's ``type`` (so ``int`` keeps its "invalid int value"
    error), and ``help``, ``metavar`` and ``choices`` are argparse's too.
    """

    help: str
    metavar: str | None = None
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None


class SettingFlag(msgspec.Struct, frozen=True):
    """One setting's flag as a parser takes it: its declaration, and whether it is a switch."""

    setting: str
    flag: Flag
    switch: bool
    """A bool setting: the flag alone sets it true."""
    listed: bool = False
    """A list setting (queues, cpus): the flag given again adds to the list."""

    @property
    def option(self) -> str:
        """The flag itself: ``--memory-budget`` for ``memory_budget``."""
        return "--" + self.setting.replace("_", "-")


def _cpu_count() -> int:
    return os.cpu_count() or 1


def _host_and_pid() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class WorkerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How one worker process behaves: the keys of the config's [worker] section.

    Built by :func:`settings_from`, which checks every value against its
    declared type and range; the constructor trusts its caller, as a
    Struct's does, and checks only the rules between fields.
    """

    # Settings a flag may give too (--queues, ...), in the order `taskq-worker --help` lists them.
    queues: Annotated[
        tuple[Name, ...],
        Meta(min_length=1),
        Flag("comma-separated queues to take jobs from"),
    ] = ("default",)
    # The modules (or packages) whose functions this worker runs as ``call``
    # jobs: nothing else is run (see taskq.broker.worker_policy.Policy).
    modules: Annotated[
        tuple[ModuleName, ...],
        Flag(
            "comma-separated modules or packages whose functions this worker runs "
            "(nothing else is run)"
        ),
    ] = ()
    allow_python_exec: Annotated[
        bool,
        Flag("also run python_exec jobs: code sent with the job (trusted submitters only)"),
    ] = False
    allow_shell: Annotated[
        bool, Flag("also run shell jobs: commands sent with the job (trusted submitters only)")
    ] = False
    concurrency: Annotated[AtLeastOne, Flag("jobs at once (default: CPU count)", parse=int)] = (
        msgspec.field(default_factory=_cpu_count)
    )
    # (MIN, MAX): slots follow the backlog between these (see taskq.worker.autoscale),
    # starting at MIN, instead of a fixed ``concurrency`` (then unused).
    autoscale: Annotated[
        tuple[AtLeastOne, AtLeastOne] | None,
        Flag(
            "keep between MIN and MAX slots, growing with the backlog and shrinking when "
            "idle (instead of --concurrency)",
            metavar="MIN,MAX",
        ),
    ] = None
    # Bytes the memory limits of the jobs running at once may add up to
    # (written as a size, "6GiB"). Any slot may be given a job with the
    # worker's largest memory limit, so it caps the slots at
    # memory_budget // max_limits.memory_bytes.
    memory_budget: Annotated[
        Annotated[int, Meta(ge=1)] | None,
        Flag(
            "most memory the running jobs' limits may add up to, as in 6GiB "
            "(caps the slots at SIZE / max_limits.memory_bytes)",
            metavar="SIZE",
        ),
    ] = None
    # Bytes of each attempt's output the store keeps (a size, "4MiB"): past it
    # the oldest go, and a reader is told how much (see taskq.broker.ops.output).
    output_keep_bytes: Annotated[
        Annotated[int, Meta(ge=1)],
        Flag(
            "most output the store keeps of each attempt, as in 4MiB (the oldest goes first)",
            metavar="SIZE",
        ),
    ] = 4 * 2**20
    # Most jobs claimed beyond the free slots while jobs are short (see
    # taskq.worker.prefetch); None: 256, or four times the concurrency if more; 0: never.
    prefetch: Annotated[
        Annotated[int, Meta(ge=0)] | None,
        Flag(
            "most jobs claimed beyond the free slots while jobs are short "
            "(default: 256, or four times the concurrency if more; 0: never)",
            parse=int,
        ),
    ] = None
    labels: Annotated[tuple[Name, ...], Flag("comma-separated labels jobs may require")] = ()
    # Variables (or fnmatch patterns) of the worker's environment that jobs see,
    # beyond the base set of taskq.worker.sandbox.environment.
    env_passthrough: Annotated[
        tuple[Name, ...],
        Flag(
            "comma-separated variables (or patterns, as in OMP_*) of the worker's environment "
            "that jobs may see besides the base set",
            metavar="NAMES",
        ),
    ] = ()
    name: Annotated[Name, Flag("a name for this worker (default: host-pid)")] = msgspec.field(
        default_factory=_host_and_pid
    )
    isolation: Annotated[Isolation, Flag("pool (default) or process", choices=ISOLATION_MODES)] = (
        "pool"
    )
    # None: wherever the machine lets it run. Parsed by parse_cpu_list.
    cpus: Annotated[
        frozenset[int] | None,
        Flag("CPUs the worker and its jobs run on, as in 0-3,6 (default: any)"),
    ] = None

    # Settings only the config file sets.

    # At most one step of growth per interval; a slot idle this long leaves.
    autoscale_interval_seconds: Seconds = 1.0
    autoscale_idle_seconds: Seconds = 30.0
    # Most jobs a pool slot hands its child at once while jobs are short (see
    # Executor._may_queue); 1: one at a time. With no-op jobs on 2 cores, two
    # 2-slot workers drained 18% faster with 32 than with 16 (paired runs):
    # the jobs claimed ahead then wait in the children, not in the worker.
    child_queue: AtLeastOne = 32
    lease_seconds: Seconds = 30.0
    heartbeat_seconds: Seconds = 5.0
    # Jobs are killed this long before their leases could expire in the store
    # (the store nodes' clock error it tolerates: see taskq.worker.sandbox.lease_deadline).
    lease_margin_seconds: Seconds = 2.0
    grace_seconds: Seconds = 30.0
    idle_poll_seconds: Seconds = 1.0
    # Respawning a pool child costs ~80 ms; a child that misbehaves is replaced at once.
    pool_recycle_after: AtLeastOne = 10_000
    maintenance: bool = True
    # Parsed from the section's table by parse_limits (sizes such as "2GiB").
    max_limits: Limits = msgspec.field(default_factory=Limits)

    def __post_init__(self) -> None:
        if self.autoscale is not None and self.autoscale[0] > self.autoscale[1]:
            raise errors.ConfigError(
                f"worker: autoscale is MIN,MAX with MIN at most MAX (got {self.autoscale[0]},"
                f"{self.autoscale[1]})"
            )
        ceiling, reason = self.slot_ceiling
        if ceiling < self.min_slots:
            raise errors.ConfigError(
                f"worker: {self.min_slots} slot(s) do not fit {reason}, which allows {ceiling}"
            )
        if self.heartbeat_seconds * 2 + self.lease_margin_seconds > self.lease_seconds:
            raise errors.ConfigError(
                "worker: lease_seconds must be at least two heartbeat_seconds plus "
                "lease_margin_seconds, so one missed heartbeat stops no job (got "
                f"lease_seconds={self.lease_seconds}, heartbeat_seconds={self.heartbeat_seconds}, "
                f"lease_margin_seconds={self.lease_margin_seconds})"
            )

    def check_runs_something(self) -> None:
        """Refuse settings under which the worker would refuse every job (no modules), or run
        anything for anyone (a module of Python's own, such as ``os`` or ``builtins``)."""
        if not (self.modules or self.allow_python_exec or self.allow_shell):
            raise errors.ConfigError(
                "worker: no modules given: name the modules whose functions this worker "
                "runs (--modules pkg.tasks, or [worker] modules), or it would refuse every job"
            )
        own = [module for module in self.modules if worker_policy.of_the_standard_library(module)]
        if own:
            raise errors.ConfigError(
                f"worker: {', '.join(own)} is Python's own: a worker runs every function of "
                "its modules for anyone who submits (os:system, builtins:exec), which is what "
                "--allow-shell asks a flag for; give the modules of your own jobs"
            )

    @property
    def policy(self) -> Policy:
        """What this worker runs: its modules' functions, and the kinds of code it allows."""
        return Policy(
            modules=self.modules,
            allow_python_exec=self.allow_python_exec,
            allow_shell=self.allow_shell,
        )

    @property
    def most_prefetch(self) -> int:
        # The jobs a worker starts within its claim-ahead horizon follow its
        # rate, not its slot count, and the horizon (see taskq.worker.prefetch)
        # bounds how long any of them waits. With no-op jobs on 2 cores, two
        # 2-slot workers on a 3-node rqlite cluster drained about 15% faster
        # with 256 than with 128 (paired runs), in fewer, larger commits. Four
        # times the slots bounds a large worker's, as before.
        if self.prefetch is not None:
            return self.prefetch
        return max(_LEAST_DEFAULT_PREFETCH, 4 * self.max_slots)

    @property
    def min_slots(self) -> int:
        return self.concurrency if self.autoscale is None else self.autoscale[0]

    @property
    def max_slots(self) -> int:
        """The most slots this worker may have: MAX, within its CPUs and memory budget."""
        return self.slot_ceiling[0]

    @property
    def slot_ceiling(self) -> tuple[int, str]:
        """The most slots the settings allow, and what sets that number."""
        if self.autoscale is None:
            ceiling, reason = self.concurrency, "concurrency"
        else:
            ceiling, reason = self.autoscale[1], "autoscale MAX"
            # A fixed concurrency may exceed the CPU set (jobs that wait on I/O);
            # growing on its own, the worker stays within it.
            if self.cpus is not None and len(self.cpus) < ceiling:
                ceiling, reason = len(self.cpus), f"cpus ({len(self.cpus)} CPUs)"
        if self.memory_budget is not None:
            fitting = self.memory_budget // self.max_limits.memory_bytes
            if fitting < ceiling:
                budget = humanize.size(self.memory_budget)
                per_job = humanize.size(self.max_limits.memory_bytes)
                ceiling, reason = fitting, f"memory_budget ({budget}, {per_job} per job)"
        return ceiling, reason


def setting_flags() -> list[SettingFlag]:
    """The settings ``taskq-worker`` takes as flags, in the order they are declared."""
    found = []
    for field in msgspec.structs.fields(WorkerSettings):
        # Annotated[kind, ..., Flag(...)]: the Flag among the annotations, if any.
        extras = getattr(field.type, "__metadata__", ())
        flag = next((extra for extra in extras if isinstance(extra, Flag)), None)
        if flag is None:
            continue
        kind = get_args(field.type)[0]
        found.append(SettingFlag(field.name, flag, switch=kind is bool, listed=_a_list(kind)))
    return found


def _a_list(kind: Any) -> bool:
    """Whether a setting of type ``kind`` holds a list of values (``tuple[str, ...]``, a
    frozenset, or either or None), not one value or a pair (autoscale's MIN,MAX)."""
    kinds = get_args(kind) if get_origin(kind) in (Union, UnionType) else (kind,)
    return any(
        get_origin(each) is frozenset
        or (get_origin(each) is tuple and get_args(each)[1:] == (Ellipsis,))
        for each in kinds
    )


def settings_from(
    section: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> WorkerSettings:
    """Settings from a config section, then non-None ``overrides`` (command-line flags)."""
    values: dict[str, Any] = dict(section)
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    # A flag for one way of counting slots overrides the file's other way.
    for flag, other in (("autoscale", "concurrency"), ("concurrency", "autoscale")):
        if flag in given:
            values.pop(other, None)
    values.update(given)
    if "autoscale" in values:
        if "concurrency" in values:
            raise errors.ConfigError(
                "worker: give concurrency (a fixed number of slots) or autoscale, not both"
            )
        values["autoscale"] = _min_and_max(values["autoscale"])
    for key in _SIZES:
        if isinstance(values.get(key), str):
            try:
                values[key] = parse_size(key, values[key])
            except LimitsInvalid as exc:
                raise errors.ConfigError(f"worker: {exc}") from exc
    for key in _NAME_LISTS:
        if isinstance(values.get(key), str):
            # Each once, where first given: --queues a,b --queues a is a,b.
            parts = (part.strip() for part in values[key].split(","))
            values[key] = list(dict.fromkeys(part for part in parts if part))
    if isinstance(values.get("modules"), list | tuple):
        _check_module_names(values["modules"])
    if "cpus" in values:
        values["cpus"] = parse_cpu_list(values["cpus"])
        check_available(values["cpus"])
        # One job per CPU it may use, as without the setting.
        if "autoscale" not in values:
            values.setdefault("concurrency", len(values["cpus"]))
    if isinstance(values.get("max_limits"), Mapping):
        try:
            values["max_limits"] = parse_limits(values["max_limits"])
        except LimitsInvalid as exc:
            # A table of the file that refuses unknown keys: told as its others are.
            meant = closest_known(
                [key for key in values["max_limits"] if key not in FORMS], list(FORMS)
            )
            raise errors.ConfigError(f"worker: max_limits: {exc}{meant}") from exc
    return converted(values, WorkerSettings, prefix="worker: ", section="worker")


def _check_module_names(modules: Sequence[object]) -> None:
    """Refuse, with what was meant, a function or a file given where a module is wanted.

    Celery's and RQ's users name tasks as ``module:function`` or start from
    a file; the pattern alone would say only "a module name".
    """
    for name in modules:
        if not isinstance(name, str):
            continue  # the type check names it
        module, colon, function = name.partition(":")
        if colon and _MODULE_NAME_RE.fullmatch(module):
            raise errors.ConfigError(
                f"worker: modules: {name!r} names a function ({function} in module {module}); "
                f"modules takes modules, whose declared jobs it runs: --modules {module}"
            )
        if name.endswith(".py") and ("/" in name or Path(name).is_file()):
            raise errors.ConfigError(f"worker: modules: {file_as_module(name, sys.path)}")


def file_as_module(name: str, import_path: Sequence[str]) -> str:
    """What to give instead of ``name``, a Python file (``thumbs.py``, ``mypkg/lab.py``),
    where a module is wanted: the module it imports as, and where to start the worker
    when its ``import_path`` lacks the folder that module imports from."""
    advice = f"{name!r} is a file; modules takes module names: --modules"
    file = _found_file(Path(name), import_path)
    if file is None:
        # Not found from here: the worker cannot know where it is.
        given = Path(name)
        return (
            f"{advice} {given.stem}, with the folder that holds {given.name} on the import path "
            "(PYTHONPATH)"
        )
    here = Path.cwd()
    # "" and the other relative entries are read from the worker's folder, as Python does.
    on_path = list(dict.fromkeys((here / entry).resolve() for entry in import_path))
    module, root = _module_and_root(file, on_path, here)
    if root in on_path:
        return f"{advice} {module}"
    if root == here:
        top = module.partition(".")[0] if "." in module else file.name
        return f"{advice} {module}, run from the folder that holds {top} with PYTHONPATH=."
    shown = root.relative_to(here) if root.is_relative_to(here) else root
    return f"{advice} {module}, with {shown} on the import path (PYTHONPATH={shown})"


def _found_file(given: Path, import_path: Sequence[str]) -> Path | None:
    """The file ``given`` names, absolute: from the worker's folder, else from its import path."""
    places = [Path(), *(Path(entry) for entry in import_path)]
    return next(((place / given).resolve() for place in places if (place / given).is_file()), None)


def _module_and_root(file: Path, on_path: Sequence[Path], here: Path) -> tuple[str, Path]:
    """The module ``file`` imports as, and the folder it imports from.

    Its name takes in the packages (folders with ``__init__.py``) it is in, up
    to a folder of the import path or the worker's: ``mypkg/lab.py`` is
    ``mypkg.lab``, the name its jobs are submitted by. A file in a plain folder
    is a module of its own, unless that folder is below one of the import
    path, from which Python imports it already, as a namespace package.
    """
    names, folder = [file.stem], file.parent
    while folder not in on_path and folder != here and (folder / "__init__.py").is_file():
        names.insert(0, folder.name)
        folder = folder.parent
    if folder in on_path or folder == here or len(names) > 1:
        return ".".join(names), folder
    for above in folder.parents:
        between = folder.relative_to(above).parts
        if above in on_path and _imports_from(above, between, on_path):
            return ".".join([*between, file.stem]), above
    return file.stem, folder


def _imports_from(root: Path, folders: Sequence[str], on_path: Sequence[Path]) -> bool:
    """Whether ``folders``, below ``root``, import as packages from there: their names
    are names, and no package or module of the first one's comes before it on the path."""
    if not all(folder.isidentifier() for folder in folders):
        return False
    from importlib.machinery import PathFinder  # only a refusal needs it

    spec = PathFinder.find_spec(folders[0], [str(entry) for entry in on_path])
    found = spec.submodule_search_locations if spec is not None else None
    return found is not None and str(root / folders[0]) in list(found)


def _min_and_max(value: Any) -> list[int]:
    """``autoscale`` as [MIN, MAX], from "MIN,MAX" text or a list of two whole numbers."""
    parts = value.split(",") if isinstance(value, str) else value
    if isinstance(parts, list | tuple) and len(parts) == 2:
        numbers = [
            int(part) if isinstance(part, str) and part.strip().isdigit() else part
            for part in parts
        ]
        whole = [number for number in numbers if type(number) is int and number >= 1]
        if len(whole) == 2:
            return whole
    raise errors.ConfigError(
        f"worker: autoscale must be MIN,MAX, two whole numbers of at least 1 such as 1,8 "
        f"(got {value!r})"
    )
