"""What a job submitted alone, not as a step of a workflow, is not given: ``run_anyway``
without ``after``; nor is a submit of one job given a flow.

``run_anyway`` says how a job takes its parents' ends; submitted alone, its
parents are those of ``after``, and without them the option would be dropped
unsaid. ``taskq submit --run-anyway`` without ``--after`` is refused for the
same reason. Only what the caller gives at the submit is refused: an option
a job was declared with (``@taskq.job(run_anyway=True)``, a job meant to end
workflows) applies where it means something, as the command line takes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskq import errors
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.flows import Flow


def check_submit(target: object, keywords: Mapping[str, Any]) -> None:
    """Refuse what a submit of one target is not given: a flow (``resize.step(...)``,
    whose steps a workflow's submit writes), or ``run_anyway`` without ``after``."""
    if isinstance(target, Flow):
        raise errors.InvalidJob(
            f"submit takes one job, not a flow ({target!r}): a flow is submitted whole, "
            "client.submit_workflow(flow)",
            field="target",
        )
    check_alone(given_options(target, keywords), name_of(target))


def name_of(target: object) -> str:
    """A target as a refusal names it: ``pkg.mod:f``, or a function's (declared job's) name."""
    if isinstance(target, NamedCall):
        return target.target
    return target if isinstance(target, str) else str(getattr(target, "__qualname__", "submit"))


def given_options(target: object, keywords: Mapping[str, Any]) -> Mapping[str, Any]:
    """The options a submit of ``target`` was given by its caller: a name's keywords, or
    those of a declared job's ``options()`` (its ``options_given``); a function's keywords
    are its call's own."""
    if isinstance(target, str):
        return keywords
    given = getattr(target, "options_given", None)
    return given if isinstance(given, Mapping) else {}


def check_alone(options: Mapping[str, Any], name: str) -> None:
    """Refuse ``run_anyway=True`` without ``after`` given to a job submitted alone, named
    ``name`` in the refusal (:class:`taskq.errors.InvalidJob`, field ``run_anyway``)."""
    if options.get("run_anyway") is True and not options.get("after"):
        raise errors.InvalidJob(
            f"{name}: run_anyway=True goes with after=[...], the jobs to run after however "
            "they end; a job submitted alone has none (in a workflow, a step after others "
            "takes run_anyway without after)",
            field="run_anyway",
        )
