"""What a worker may run: ``call`` targets from its modules, and which other kinds.

The one rule, shared by the worker that claims a job (its preparer refuses
what its policy does not allow) and by the store's answer to which other
worker of the queue may run a job refused (``ops.workers.job_served_elsewhere``,
over the policies workers record when they register). :func:`summary` writes a
policy short, for ``taskq workers`` and the console's workers.
"""

from __future__ import annotations

import sys
from collections.abc import Collection

import msgspec


class Policy(msgspec.Struct, frozen=True):
    """What a worker is configured to run: ``call`` targets from its modules, and which kinds."""

    modules: tuple[str, ...] = ()
    allow_python_exec: bool = False
    allow_shell: bool = False

    def refusal(self, kind: str, target: str | None = None) -> str | None:
        """Why a worker of this policy must not run a payload of ``kind``; ``None`` when it may.

        ``target`` is a ``call``'s ``"pkg.mod:func"``.
        """
        if kind == "call":
            module = (target or "").partition(":")[0]
            if not module_allowed(module, self.modules):
                return (
                    f"{target}: {module} is not among this worker's modules "
                    f"({', '.join(self.modules) or 'none given'})"
                )
            return None
        if not (self.allow_python_exec if kind == "python_exec" else self.allow_shell):
            return f"{kind} payloads are disabled on this worker"
        return None


def summary(policy: Policy | None) -> str:
    """What a worker of ``policy`` runs, in one short word list, as ``taskq workers`` and the
    console show it.

    Its modules, then ``+python_exec`` and ``+shell`` when it allows them:
    ``lab.jobs,lab.io +shell``; ``nothing`` when it allows nothing; ``-`` when
    unknown (None: it recorded no policy, or one this taskq cannot read).
    """
    if policy is None:
        return "-"
    words = [",".join(policy.modules)] if policy.modules else []
    if policy.allow_python_exec:
        words.append("+python_exec")
    if policy.allow_shell:
        words.append("+shell")
    return " ".join(words) or "nothing"


def module_allowed(module: str, modules: Collection[str]) -> bool:
    """Whether ``module`` is one of ``modules`` or inside one of those packages."""
    return any(module == allowed or module.startswith(allowed + ".") for allowed in modules)


def of_the_standard_library(module: str) -> bool:
    """Whether ``module`` is Python's own (``os``, ``builtins``, ``posix``, ``os.path``...).

    No worker should be given one as its modules: every function of it would
    then run for anyone who submits (``os:system``, ``builtins:exec``), which
    is what the shell and python-exec payloads each ask a flag for.
    """
    return module.partition(".")[0] in sys.stdlib_module_names


def standard_library_advice(target: str) -> str:
    """What to do instead of running ``target``, a function of the standard library."""
    return (
        f"{target} is a function of Python's standard library, and no worker should be "
        "given such a module (every function of it would run for anyone who submits): "
        "call it from a job in a module of your own"
    )
