"""Workflows as Python: steps, chains, fan-out and fan-in, built lazily and submitted whole.

```python
thumbnails = resize.map(paths).then(build_index)          # fan out, then fan in
training = prepare.step(url).then(train).then(evaluate)   # a chain
handle = client.submit_workflow(thumbnails, name="thumbnails")
```

A :class:`Flow` is a value: steps (jobs not yet submitted) and which steps
each runs after. ``a.then(b)`` runs ``b``'s first steps after ``a``'s last
ones, so ``then`` after a group is a fan-in: the next step gets every member
as a parent, in order. :func:`group` sets flows side by side. A step is one
job however many flows name it, which is how a diamond is drawn: name the
step it starts from twice. An empty flow (a ``map`` over no items) adds no
step and no wait: ``a.then(empty).then(b)`` is ``a.then(b)``. Nothing is
written until the whole flow is submitted (``client.submit_workflow``) or
spawned by a running job (``taskq.current_job().spawn``), in one atomic write. Flows are built by
adding steps after steps, so a cycle can only come from naming a step after
one that runs after it; it is refused when the flow is built. A refusal made
while a job runs (a cycle, a bad step) is noted on the job
(:func:`taskq.job_context.refuse`): built by the job's own code, the flow
would be refused on every attempt, so the job that fails with it is not retried.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import msgspec

from taskq import errors, job_context
from taskq.broker.client import celery_habits
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.specs import (
    JobDeclaration,
    Target,
    job_id,
    parents_here,
    spec_of,
    validate_spec,
    workflow_id_of,
)
from taskq.broker.ops.enqueue import MAX_PAYLOAD_BYTES
from taskq.broker.records import JobSpec, WorkflowSubmission

_LABEL_CHARS = 60


class _Step:
    """One job of a flow; its identity is what makes it one job wherever it is named.

    ``call``: the call by name a submit resolves (None: ``spec`` is the job as it goes).
    """

    __slots__ = ("call", "spec")

    def __init__(self, spec: JobSpec, call: NamedCall | None = None) -> None:
        self.spec = spec
        self.call = call

    def __repr__(self) -> str:
        payload = self.spec.payload
        name = str(payload.get("target") or payload.get("function") or self.spec.kind.value)
        args = ", ".join(repr(arg) for arg in payload.get("args") or ())
        label = f"{name.rpartition(':')[2]}({args})"
        return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 4] + "...)"


# Said here, where the step can be named; the store refuses it too, by position.
_STEP_KEY = (
    "a step of a workflow takes no idempotency key of its own: give the whole workflow "
    "one (submit_workflow(flow, idempotency_key=...)); a spawn is written once per attempt"
)


class Flow:
    """Jobs to submit together, and what each runs after: see :mod:`taskq.broker.client.flows`.

    Built by :func:`step` (or a declared job's ``step`` and ``map``),
    :meth:`then` and :func:`group`; never changed once built.
    """

    __slots__ = ("_ends", "_parents", "_steps")

    def __init__(
        self,
        steps: Sequence[_Step],
        parents: Mapping[_Step, tuple[_Step, ...]],
        ends: Sequence[_Step],
    ) -> None:
        self._steps = tuple(steps)
        self._parents = dict(parents)
        self._ends = tuple(ends)

    def __repr__(self) -> str:
        shown = ", ".join(repr(step) for step in self._steps[:3])
        more = f", ... {len(self._steps) - 3} more" if len(self._steps) > 3 else ""
        return f"<Flow of {len(self._steps)} step(s): {shown}{more}>"

    def __len__(self) -> int:
        return len(self._steps)

    if not TYPE_CHECKING:  # a type checker still flags every name and operator a flow lacks

        def __getattr__(self, name: str) -> Any:
            raise celery_habits.missing(self, name, celery_habits.FLOW, "flow")

        def __or__(self, other: object) -> Any:
            raise TypeError(celery_habits.PIPE)

        __ror__ = __or__

    def then(self, following: Flow | Target, /) -> Flow:
        """This flow, then ``following``: each of its first steps runs after all of this one's last.

        ``following`` is a flow, or a target as :func:`step` takes it, called
        with no arguments (``.then(build_index)``). After a group (a
        ``map``), that is a fan-in: the step has every member as a parent,
        in the group's order, and reads their results with
        ``taskq.current_job().parent_results()``. After a step, a group is a
        fan-out. Whether a step waits only for parents that succeeded is its
        own option: ``run_anyway``.

        An empty ``following`` (a ``map`` over no items, an empty group) passes
        this flow's last steps on: ``a.then(x.map([])).then(b)`` runs ``b``
        after ``a``, as ``a.then(b)`` does.
        """
        nxt = as_flow(following)
        if not nxt._steps:
            # Its ends are none: taken as this flow's, what comes next would wait for nothing.
            return self
        parents = _merged_parents((self, nxt))
        for root in nxt._roots():
            parents[root] = _union(parents.get(root, ()), self._ends)
        return _built((*self._steps, *nxt._steps), parents, nxt._ends)

    def by_name(self) -> dict[int, NamedCall]:
        """The steps given by name (``step("pkg.mod:f", ...)``, not unchecked), by their
        positions in the submission, each a call a client resolves as declared."""
        return {
            index: replace(each.call, where=f"step {each!r}")
            for index, each in enumerate(self._steps)
            if each.call is not None
        }

    def submission(
        self,
        *,
        name: str = "",
        idempotency_key: str | None = None,
        submitter: str = "",
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        declared: Mapping[int, JobSpec] | None = None,
        store: str | None = None,
    ) -> WorkflowSubmission:
        """The flow as one request: its jobs in an order that puts parents first.

        ``declared``: the jobs of the steps given by name, resolved (by
        position, see :meth:`by_name`); without it they go with the options
        given alone. Each job is checked as an enqueue would
        (:class:`taskq.errors.InvalidJob` names the step at fault): a flow that
        is refused is refused whole, before anything is sent. ``store``: the
        submitting client's (``store_name``), whose jobs alone a step's ``after``
        may name by their handles; None (a spawn) takes a handle of any store.
        """
        given = [(declared or {}).get(index, each.spec) for index, each in enumerate(self._steps)]
        jobs = []
        for each, job in zip(self._steps, given, strict=True):
            try:
                job = parents_here(job, store)
                jobs.append(job)
                validate_spec(job, max_payload_bytes=max_payload_bytes)
                if job.idempotency_key is not None:
                    raise errors.InvalidJob(_STEP_KEY, field="idempotency_key")
            except errors.InvalidJob as exc:
                refused = errors.InvalidJob(f"step {each!r}: {exc}", field=exc.field)
                raise job_context.refuse(refused) from None
        position = {each: index for index, each in enumerate(self._steps)}
        return WorkflowSubmission(
            jobs=tuple(
                job if job.submitter or not submitter else _by(job, submitter) for job in jobs
            ),
            parents=tuple(
                tuple(position[parent] for parent in self._parents.get(each, ()))
                for each in self._steps
            ),
            name=name,
            idempotency_key=idempotency_key,
            submitter=submitter,
        )

    def _positions(self, flow: Flow) -> list[int]:
        """Where ``flow``'s steps are in this one (and in its submission), in ``flow``'s order.

        :class:`taskq.errors.InvalidJob` when one of them is not part of this flow.
        """
        position = {each: index for index, each in enumerate(self._steps)}
        missing = [each for each in flow._steps if each not in position]
        if missing:
            raise errors.InvalidJob(f"{missing[0]!r} is not a step of this flow", field="step")
        return [position[each] for each in flow._steps]

    def _bare_part(self, target: Target) -> Flow:
        """The one step of this flow that calls ``target`` without arguments (a declared job
        given bare, as in ``.then(total)``), as a flow of it: see :func:`part_of`."""
        wanted = None
        named = job_context.shown(target)
        if isinstance(target, str) or callable(target) or isinstance(target, JobDeclaration):
            named = f"{_name(target)} given bare"
            # Refused built bare (it needs arguments), it is no step of a flow either.
            with contextlib.suppress(errors.InvalidJob):
                wanted = _step(target, (), {})
        found = [each for each in self._steps if wanted is not None and _same_call(each, wanted)]
        if len(found) == 1:
            return Flow(found, {}, found)
        if not found:
            raise errors.InvalidJob(
                f"{named if wanted is None else repr(wanted)} is not a step of this flow: a "
                "part of it is a flow it was built from, or a declared job given bare",
                field="step",
            )
        # Given bare, each is another job of the same call: which is meant, only its flow says.
        raise errors.InvalidJob(
            f"{wanted!r} is {len(found)} steps of this flow: to name one, build it as a step "
            f"of its own (done = {_name(target)}.step()), put that in the flow and give it",
            field="step",
        )

    def _end_positions(self) -> list[int]:
        """Where the flow's last steps (those a ``then`` would run after) are in it."""
        return self._positions(Flow(self._ends, {}, self._ends))

    def _roots(self) -> list[_Step]:
        """The steps that run after no other step of this flow."""
        return [each for each in self._steps if not self._parents.get(each)]


def part_of(part: Flow | Target, submitted: Flow | None) -> Flow:
    """``part`` as a workflow handle's ``jobs(part)`` takes it, of the flow ``submitted``:
    a flow as it is (its steps are found by identity); a target given bare (``total``, as
    in ``.then(total)``), which has none, as the one step of ``submitted`` that calls it
    without arguments. :class:`taskq.errors.InvalidJob` ("... is not a step of this flow")
    for anything else, or for a target that no step, or several, is.

    ``submitted`` None (a handle read back by its id, which takes no part and says so):
    the part is left unread.
    """
    if isinstance(part, Flow):
        return part
    if submitted is None:
        return Flow((), {}, ())
    return submitted._bare_part(part)


def step(target: Target, /, *args: Any, **keywords: Any) -> Flow:
    """A flow of one job: a call of ``target``, which a workflow submits or a job spawns.

    ``target`` as ``client.submit`` takes it: a module-level function (every
    argument is the call's), or ``"pkg.module:function"``, whose keywords are
    the job's options (:func:`taskq.call_spec`; the call's own go in
    ``kwargs={...}``). A declared job's ``resize.step(...)`` is the same as
    ``step(resize, ...)``, with the options it was declared with. A step by
    name is submitted as its declaration says (``client.submit_workflow``
    resolves it as ``client.submit`` would, refusing the flow whole, naming
    the step, if no worker declares it), unless ``unchecked=True``.
    """
    one = _step(target, args, keywords)
    return Flow((one,), {}, (one,))


def as_flow(part: Flow | Target) -> Flow:
    """``part`` as a flow: a flow as it is, a target (a declared job given bare, as in
    ``.then(build_index)``) as a step of it without arguments.

    Anything else is refused in the words of a flow, with what was most likely
    meant: a handle is waited on with ``after``, several flows are a group.
    """
    if isinstance(part, Flow):
        return part
    if not (isinstance(part, str) or callable(part) or isinstance(part, JobDeclaration)):
        refused = errors.InvalidJob(
            "a flow is made of steps (resize.step(...), resize.map(...), taskq.group(...)), "
            f'declared jobs and "pkg.module:function" names, not {job_context.shown(part)}'
            + _meant(part),
            field="step",
        )
        raise job_context.refuse(refused)
    try:
        return step(part)
    except errors.InvalidJob as exc:
        if exc.field != "args":
            raise
        # Given bare, it is called without arguments: one that needs some most
        # likely expected its parents' results, as a Celery chain would pass them.
        refused = errors.InvalidJob(
            f"{exc} (a step after others is not given their results as arguments: it reads "
            "them with taskq.current_job().parent_results(); its own arguments go in "
            f"{_name(part)}.step(...))",
            field=exc.field,
        )
        raise job_context.refuse(refused) from None


def fan_out(
    target: Target, items: Iterable[Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Flow:
    """One step per item, side by side: ``target(item, *args, **kwargs)`` (``map``'s body).

    A string is refused, not fanned out over its characters: ``map(path)`` for
    ``step(path)`` is a slip whose jobs would all fail.
    """
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        name = _name(target)
        what = "one item" if isinstance(items, str | bytes) else "not a collection of items"
        refused = errors.InvalidJob(
            f"{name}.map takes the items to fan out over, one job each: "
            f"{job_context.shown(items)} is {what}; one job is {name}.step(...), "
            f"one job per item {name}.map([...])",
            field="args",
        )
        raise job_context.refuse(refused)
    steps = []
    for position, item in enumerate(items):
        try:
            steps.append(_step(target, (item, *args), kwargs))
        except errors.InvalidJob as exc:
            if exc.field != "args" or not isinstance(item, tuple | list | Mapping):
                raise
            # A Celery starmap habit: an item meant as a call's arguments, not its first one.
            name = _name(target)
            spread = "**call" if isinstance(item, Mapping) else "*call"
            refused = errors.InvalidJob(
                f"{exc} ({name}.map passes each item as the first argument; item {position} is "
                f"{job_context.shown(item)}: for calls of several arguments each, "
                f"taskq.group(*({name}.step({spread}) for call in items)))",
                field="args",
            )
            raise job_context.refuse(refused) from None
    return Flow(steps, {}, steps)


def _step(target: Target, args: Sequence[Any], keywords: Mapping[str, Any]) -> _Step:
    """The step of a call of ``target``; by name, with the call its submit resolves."""
    given = dict(keywords)
    try:
        if not isinstance(target, str):
            return _Step(spec_of(target, args, given))
        unchecked = given.pop("unchecked", False)
        spec = spec_of(target, args, dict(given), caller="step")
    except errors.InvalidJob as exc:
        job_context.refuse(exc)
        raise
    return _Step(spec, None if unchecked else NamedCall(target, tuple(args), given))


def group(*flows: Flow | Target) -> Flow:
    """Flows (or targets, as :func:`step` takes them) side by side; ``then`` waits for all.

    A step named in several of them is one job, which runs after every
    parent any of them gives it; an empty one adds nothing.
    """
    members = [as_flow(each) for each in flows]
    steps = [each for member in members for each in member._steps]
    ends = _union((), [end for member in members for end in member._ends])
    return _built(steps, _merged_parents(members), ends)


def _name(target: Target) -> str:
    """What a reader calls ``target`` in code: ``resize`` for ``resize`` or ``"pkg.mod:resize"``."""
    if isinstance(target, str):
        return target.rpartition(":")[2]
    return str(getattr(target, "__qualname__", None) or getattr(target, "__name__", "job"))


def _meant(part: object) -> str:
    """What a value that is not a flow most likely stood for, said as a refusal's end."""
    # Celery's result.then(...): here a stored job is waited on by naming it.
    if not isinstance(part, int):
        with contextlib.suppress(errors.InvalidJob):
            submitted = job_id(part)
            return (
                f": job {submitted} is already submitted; a job or step waits for it by naming "
                f"it, as in resize.options(after=[{submitted}])"
            )
    workflow = workflow_id_of(part)
    if workflow is not None:
        return (
            f": workflow {workflow} is already submitted; a job or step waits for its jobs by "
            "naming them, as in resize.options(after=handle.job_ids)"
        )
    if isinstance(part, Iterable) and not isinstance(part, str | bytes | Mapping):
        return ": flows side by side are taskq.group(*flows), each its own argument"
    return ""


def _same_call(one: _Step, other: _Step) -> bool:
    """Whether two steps are the same call with the same options (two jobs, if both are
    in a flow)."""
    return one.spec == other.spec and one.call == other.call


def _by(spec: JobSpec, submitter: str) -> JobSpec:
    return msgspec.structs.replace(spec, submitter=submitter)


def _union(first: Iterable[_Step], second: Iterable[_Step]) -> tuple[_Step, ...]:
    """Both, in order, each once."""
    return tuple(dict.fromkeys((*first, *second)))


def _merged_parents(flows: Iterable[Flow]) -> dict[_Step, tuple[_Step, ...]]:
    """Every flow's dependencies: a step named in several runs after the parents of all."""
    merged: dict[_Step, tuple[_Step, ...]] = {}
    for flow in flows:
        for child, parents in flow._parents.items():
            merged[child] = _union(merged.get(child, ()), parents)
    return merged


def _built(
    steps: Iterable[_Step], parents: Mapping[_Step, tuple[_Step, ...]], ends: Sequence[_Step]
) -> Flow:
    """The flow of ``steps``, each once, parents first (else in the order given); a cycle refused.

    Kahn's order, the earliest given step first among those ready: a flow
    built by adding steps after steps keeps the order it was written in.
    """
    order = {each: index for index, each in enumerate(dict.fromkeys(steps))}
    waiting_on = {each: len(parents.get(each, ())) for each in order}
    children: dict[_Step, list[_Step]] = {}
    for child, its_parents in parents.items():
        for parent in its_parents:
            children.setdefault(parent, []).append(child)
    ready = [(index, each) for each, index in order.items() if not waiting_on[each]]
    heapq.heapify(ready)
    placed: list[_Step] = []
    while ready:
        _, each = heapq.heappop(ready)
        placed.append(each)
        for child in children.get(each, ()):
            waiting_on[child] -= 1
            if not waiting_on[child]:
                heapq.heappush(ready, (order[child], child))
    if len(placed) < len(order):
        stuck = _in_cycles({each for each in order if waiting_on[each]}, children)
        stuck.sort(key=order.__getitem__)
        cycle = errors.InvalidJob(
            "a step cannot run after itself: "
            + ", ".join(repr(each) for each in stuck[:5])
            + (f" and {len(stuck) - 5} more" if len(stuck) > 5 else "")
            + (" would wait on each other" if len(stuck) > 1 else " would wait on itself")
            # Most often a chain that names one step twice, meaning to run its call twice.
            + " (a step is one job wherever a flow names it: to run a call again, make "
            "another step of it with .step(...))",
            field="after",
        )
        raise job_context.refuse(cycle)
    return Flow(placed, parents, ends)


def _in_cycles(stuck: set[_Step], children: Mapping[_Step, list[_Step]]) -> list[_Step]:
    """Of the steps Kahn's order could not place, those on a cycle, not just after one."""
    while True:
        # A step whose children are all placeable is not on a cycle: only after one.
        after_only = {
            each for each in stuck if not any(child in stuck for child in children.get(each, ()))
        }
        if not after_only:
            return list(stuck)
        stuck -= after_only
