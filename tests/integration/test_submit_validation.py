"""Every submit is stored exactly as given or refused whole, on both stores.

A refused submit raises a :mod:`taskq.errors` exception naming what was
wrong and changes nothing: no job row, no count, no rate-limit token. The
stores are compared before and after each call rather than assumed empty,
because the rqlite cluster is shared by every test of the session.
"""

from __future__ import annotations

import json
import reprlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import taskq
from taskq import errors
from taskq.broker import job_validation
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_list
from taskq.broker.ops.queues import submit_limit_remove, submit_limit_set
from taskq.broker.records import JobState
from taskq.broker.stores.store import Consistency, Row, Statement, Store

TARGET = "tests.support.jobs:echo"
LIMIT_RATE = 100_000.0


def _deep(levels: int) -> list[Any]:
    """A list nested ``levels`` deep, built without recursion."""
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


DEEP = _deep(100_000)


@dataclass(frozen=True)
class Snapshot:
    """What a submit could change: new rows anywhere, and the rows of this test's names."""

    last_job: int | None
    last_execution: int | None
    jobs: list[Row]
    counts: list[Row]
    queues: list[Row]
    buckets: list[Row]


def _rows(store: Store, sql: str, prefix: str) -> list[Row]:
    return store.query(Statement(sql, {"p": prefix}), consistency=Consistency.LINEARIZABLE)


def snapshot(store: Store, prefix: str) -> Snapshot:
    """The store as far as a submit by this test could change it."""
    mine = "instr({column}, :p) = 1"
    return Snapshot(
        last_job=_rows(store, "SELECT max(id) AS n FROM jobs", prefix)[0]["n"],
        last_execution=_rows(store, "SELECT max(id) AS n FROM executions", prefix)[0]["n"],
        jobs=_rows(
            store, f"SELECT * FROM jobs WHERE {mine.format(column='queue')} ORDER BY id", prefix
        ),
        counts=_rows(
            store,
            f"SELECT * FROM job_counts WHERE {mine.format(column='queue')} ORDER BY queue, state",
            prefix,
        ),
        queues=_rows(
            store, f"SELECT * FROM queues WHERE {mine.format(column='name')} ORDER BY name", prefix
        ),
        buckets=_rows(
            store,
            f"SELECT * FROM submit_buckets WHERE {mine.format(column='submitter')} "
            "ORDER BY submitter",
            prefix,
        ),
    )


@pytest.fixture
def prefix() -> str:
    """Queue, key and submitter names of this test alone (the cluster is shared)."""
    return f"sv-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(store: Store, prefix: str) -> Iterator[taskq.Client]:
    """A client whose submitter has a submit limit, so that every submit spends a token."""
    submitter = f"{prefix}-me"
    plan.run(store, submit_limit_set(submitter, LIMIT_RATE, 60))
    yield taskq.Client(store=store, submitter=submitter)
    plan.run(store, submit_limit_remove(submitter))


def _refused_whole(
    store: Store, prefix: str, error: type[errors.TaskqError], match: str, call: Any
) -> errors.TaskqError:
    before = snapshot(store, prefix)
    with pytest.raises(error, match=match) as caught:
        call()
    assert snapshot(store, prefix) == before
    return caught.value


# -- each refusal names its field -----------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"idempotency_key": "ok\x00a"}, "idempotency_key"),
        ({"labels": "gpu"}, "labels"),
        ({"priority": 1.5}, "priority"),
        ({"timeout": True}, "timeout"),
        ({"limits": {"memory_bytes": True}}, "limits"),
        ({"limits": {"open_files": 10**30}}, "limits"),
        ({"run_at": 1e300}, "run_at"),
        ({"queue": ""}, "queue"),
        ({"kwargs": {1: "one"}}, "payload"),
    ],
)
def test_a_refusal_carries_the_field_it_is_about(
    client: taskq.Client, prefix: str, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(errors.InvalidJob) as refused:
        client.submit(TARGET, 1, **{"queue": f"{prefix}-q", **options}, unchecked=True)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"idempotency_key": 123}, "idempotency_key"),
        ({"idempotency_key": {"a": 1}}, "idempotency_key"),
        ({"idempotency_key": "ok\x00a"}, "idempotency_key"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "k" * 256}, "idempotency_key"),
        ({"labels": "gpu"}, "labels"),
        ({"labels": ["gpu", 7]}, "labels"),
        ({"labels": {"gpu": True}}, "labels"),
        ({"priority": 1.5}, "priority"),
        ({"priority": 1e30}, "priority"),
        ({"priority": 2**31}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": "high"}, "priority"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"timeout": True}, "timeout"),
        ({"timeout": "10"}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"delay": "5"}, "delay"),
        ({"run_at": False}, "run_at"),
        ({"run_at": 1e300}, "run_at"),
        ({"run_at": job_validation.MAX_RUN_AT + 1}, "run_at"),
        ({"run_at": -1}, "run_at"),
        ({"delay": 1e300}, "delay"),
        ({"timeout": job_validation.MAX_SECONDS + 1}, "timeout"),
        ({"limits": {"open_files": 10**30}}, "open_files"),
        ({"limits": {"open_files": 2**31}}, "open_files"),
        ({"limits": {"memory_bytes": 2**63}}, "memory_bytes"),
        ({"limits": {"memory_bytes": "8388608TiB"}}, "memory_bytes"),
        ({"limits": {"processes": 2**22 + 1}}, "processes"),
        ({"limits": {"wall_seconds": 1e300}}, "wall_seconds"),
        ({"limits": "x"}, "limits"),
        ({"limits": {1: 2}}, "limits"),
        ({"limits": {"memory_bytes": True}}, "memory_bytes"),
        ({"queue": ""}, "queue"),
        ({"queue": "a\x00b"}, "queue"),
        ({"queue": "\ud800"}, "queue"),
        ({"queue": 5}, "queue"),
        ({"submitter": None}, "submitter"),
        ({"kwargs": {1: "one"}}, "keys"),
        ({"kwargs": "size=8"}, "kwargs"),
        ({"colour": "red", "prio": 1}, "colour, prio"),
        ({"args": [1]}, "args"),
    ],
)
def test_a_bad_option_is_refused_by_name_and_nothing_is_written(
    client: taskq.Client, store: Store, prefix: str, options: dict[str, Any], named: str
) -> None:
    options = {"queue": f"{prefix}-q", **options}
    _refused_whole(
        store,
        prefix,
        errors.InvalidJob,
        named,
        lambda: client.submit(TARGET, 1, **options, unchecked=True),
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([DEEP], "nested"),
        # The payload object, its args, then the argument: one level too deep.
        ([_deep(job_validation.MAX_DEPTH - 2)], "nested"),
        ([{"deep": _deep(job_validation.MAX_DEPTH - 3), 1: 2}], "keys"),
        ([{1: "a"}], "keys"),
        ([{"ok": {None: 1}}], "keys"),
        ([float("nan")], "JSON"),
        ([{1, 2}], "JSON"),
    ],
)
def test_arguments_json_would_change_or_choke_on_are_refused(
    client: taskq.Client, store: Store, prefix: str, args: list[Any], named: str
) -> None:
    queue = f"{prefix}-q"
    _refused_whole(
        store,
        prefix,
        errors.InvalidJob,
        named,
        lambda: client.submit(TARGET, *args, queue=queue, unchecked=True),
    )


@pytest.mark.parametrize("target", [5, None, "m.f", "a..b:c", "m:f\x00", "m:"])
def test_a_bad_target_is_refused(
    client: taskq.Client, store: Store, prefix: str, target: Any
) -> None:
    queue = f"{prefix}-q"
    _refused_whole(
        store,
        prefix,
        errors.InvalidJob,
        "target",
        lambda: client.submit(target, queue=queue, unchecked=True),
    )


def test_nul_keys_cannot_collide(client: taskq.Client, store: Store, prefix: str) -> None:
    queue = f"{prefix}-q"
    for key in (f"{prefix}\x00a", f"{prefix}\x00b"):
        _refused_whole(
            store,
            prefix,
            errors.InvalidJob,
            "NUL",
            lambda key=key: client.submit(
                TARGET, 1, queue=queue, idempotency_key=key, unchecked=True
            ),
        )


def test_limits_and_timeouts_within_range_are_stored_as_given(
    client: taskq.Client, prefix: str
) -> None:
    handle = client.submit(
        TARGET,
        {"deep": _deep(job_validation.MAX_DEPTH - 4)},
        queue=f"{prefix}-q",
        priority=-(2**31),
        max_attempts=2**31 - 1,
        timeout=7,
        limits={"memory_bytes": "64MiB", "wall_seconds": 2.5},
        labels=("gpu", "big", "gpu"),
        idempotency_key="k" * 255,
        unchecked=True,
    )
    job = client.get(handle.id)
    assert (job.priority, job.max_attempts, job.timeout) == (-(2**31), 2**31 - 1, 7.0)
    assert job.limits == {"memory_bytes": "64MiB", "wall_seconds": 2.5}
    assert job.labels == ("big", "gpu")
    assert job.payload["args"] == [{"deep": _deep(job_validation.MAX_DEPTH - 4)}]


def test_the_latest_time_and_the_largest_limits_are_stored_as_given(
    client: taskq.Client, prefix: str
) -> None:
    ceilings = {name: bounds.high for name, bounds in job_validation.LIMITS.items()}
    handle = client.submit(
        TARGET,
        queue=f"{prefix}-q",
        run_at=job_validation.MAX_RUN_AT,
        timeout=job_validation.MAX_SECONDS,
        limits=ceilings,
        unchecked=True,
    )
    job = client.get(handle.id)
    assert (job.run_at, job.timeout, job.limits) == (
        job_validation.MAX_RUN_AT,
        job_validation.MAX_SECONDS,
        ceilings,
    )


# -- idempotency keys stand for one request ------------------------------------------------------


def test_a_key_reused_for_another_request_is_a_conflict_that_writes_nothing(
    client: taskq.Client, store: Store, prefix: str
) -> None:
    queue, key = f"{prefix}-q", f"{prefix}-report"
    first = client.submit(TARGET, 1, queue=queue, idempotency_key=key, unchecked=True)
    # The same request again, even with other one-off fields, is the same job.
    again = client.submit(TARGET, 1, queue=queue, idempotency_key=key, delay=30, unchecked=True)
    assert again.id == first.id
    conflict = _refused_whole(
        store,
        prefix,
        errors.IdempotencyConflict,
        "different request",
        lambda: client.submit(TARGET, 2, queue=queue, idempotency_key=key, unchecked=True),
    )
    assert isinstance(conflict, errors.IdempotencyConflict)
    assert conflict.job_id == first.id
    for other in ({"priority": 1}, {"labels": ["gpu"]}, {"timeout": 5}, {"queue": f"{prefix}-r"}):
        options = {"queue": queue, "idempotency_key": key, **other}
        _refused_whole(
            store,
            prefix,
            errors.IdempotencyConflict,
            key,
            lambda options=options: client.submit(TARGET, 1, **options, unchecked=True),
        )
    assert [job.id for job in client.list(taskq.JobQuery(queue=queue))] == [first.id]


def test_a_batch_with_one_conflicting_key_writes_none_of_its_jobs(
    client: taskq.Client, store: Store, prefix: str
) -> None:
    queue, key = f"{prefix}-q", f"{prefix}-k"
    client.submit(TARGET, 1, queue=queue, idempotency_key=key, unchecked=True)
    me = client.submitter
    batch = [taskq.call_spec(TARGET, [n], queue=queue, submitter=me) for n in range(3)]
    batch.append(taskq.call_spec(TARGET, [9], queue=queue, idempotency_key=key, submitter=me))
    _refused_whole(
        store, prefix, errors.IdempotencyConflict, key, lambda: client.submit_many(batch)
    )
    twice = [
        taskq.call_spec(TARGET, [n], queue=queue, idempotency_key=f"{prefix}-twice")
        for n in range(2)
    ]
    _refused_whole(store, prefix, errors.InvalidJob, "twice", lambda: client.submit_many(twice))


def _carry_on(store: Store, op: plan.Op[Any], answer: Any) -> Any:
    """The rest of ``op`` (reads only) after its step was answered with ``answer``."""
    try:
        step = op.send(answer)
        while True:
            assert isinstance(step, plan.Read)
            step = op.send(store.query(step.statement, consistency=step.consistency))
    except StopIteration as done:
        return done.value


def test_a_resent_enqueue_finds_its_own_jobs_not_a_conflict(store: Store, prefix: str) -> None:
    """The batch applied, its answer lost, and the same batch sent again (as rqlite resends)."""
    specs = [
        taskq.call_spec(TARGET, [n], queue=f"{prefix}-q", idempotency_key=f"{prefix}-{n}")
        for n in range(3)
    ]
    op = job_enqueue(specs)
    write = next(op)
    assert isinstance(write, plan.Write)
    assert write.idempotent
    store.execute(write.statements)
    ids = _carry_on(store, op, store.execute(write.statements))
    stored = plan.run(store, job_list(queue=f"{prefix}-q"))
    assert sorted(ids) == sorted(job.id for job in stored)
    assert len(set(ids)) == 3


def test_jobs_submitted_without_a_key_get_keys_of_their_own_that_rise(
    client: taskq.Client, prefix: str
) -> None:
    """Rising, so that each lands at the end of the key index; unique, so that none is refused."""
    handles = [client.submit(TARGET, n, queue=f"{prefix}-q", unchecked=True) for n in range(50)]
    keys = [client.get(handle.id).idempotency_key for handle in handles]
    assert all(key.startswith("auto:") for key in keys)
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


def test_a_job_stored_before_fingerprints_is_returned_for_its_key(
    client: taskq.Client, store: Store, prefix: str
) -> None:
    queue, key = f"{prefix}-q", f"{prefix}-old"
    store.execute(
        [
            Statement(
                "INSERT INTO jobs (queue, kind, payload, run_at, idempotency_key, created_at) "
                "VALUES (:queue, 'call', '{}', 0, :key, 0) RETURNING id",
                {"queue": queue, "key": key},
            )
        ]
    )
    [old] = client.list(taskq.JobQuery(queue=queue))
    assert client.submit(TARGET, 1, queue=queue, idempotency_key=key, unchecked=True).id == old.id


# -- listing ---------------------------------------------------------------------------------


def test_list_takes_a_state_by_name_and_names_the_states_when_wrong(
    client: taskq.Client, prefix: str
) -> None:
    queue = f"{prefix}-q"
    done, waiting = client.submit_many(
        [taskq.call_spec(TARGET, [n], queue=queue) for n in range(2)]
    )
    client.cancel(done.id)
    assert [job.id for job in client.list(taskq.JobQuery(queue=queue, state="cancelled"))] == [
        done.id
    ]
    assert [job.id for job in client.list(taskq.JobQuery(queue=queue, state=JobState.QUEUED))] == [
        waiting.id
    ]
    assert client.list(taskq.JobQuery(queue=queue, state="succeeded")) == []
    with pytest.raises(errors.InvalidJob, match="queued, waiting, running, succeeded"):
        client.list(taskq.JobQuery(queue=queue, state="finished"))


# -- generated submits -----------------------------------------------------------------------

JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
ANY_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["", "ok\x00a", "\ud800", "x" * 300, "10", "m:f", "high"])
    | st.just(100_000).map(_deep)
    | st.sets(st.integers(), max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | st.integers() | st.none(), inner, max_size=3)
    ),
    max_leaves=6,
)
UNKNOWN_OPTIONS = ("colour", "prio", "retries", "args", "key")


def _valid_options(prefix: str) -> dict[str, st.SearchStrategy[Any]]:
    # Lone surrogates are not valid Unicode: refused as labels, so not among valid names.
    names = st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        min_size=1,
        max_size=12,
    )
    return {
        "queue": st.sampled_from([f"{prefix}-a", f"{prefix}-b"]),
        "priority": st.integers(-(2**31), 2**31 - 1),
        "delay": st.integers(0, 10**6) | st.floats(0, 1e6),
        "run_at": st.none() | st.floats(0, 4e9),
        # None: the queue's default, else 3.
        "max_attempts": st.none() | st.integers(1, 2**31 - 1),
        "timeout": st.none() | st.integers(1, 10**6) | st.floats(0.001, 1e6),
        "limits": st.fixed_dictionaries(
            {},
            optional={
                "memory_bytes": st.integers(1, 2**40) | st.sampled_from(["512MiB", "1GiB"]),
                "cpu_seconds": st.integers(1, 10**6),
                "wall_seconds": st.floats(0.1, 1e6),
            },
        ),
        "labels": st.lists(names, max_size=3) | st.tuples(names),
        "idempotency_key": st.none() | st.sampled_from([f"{prefix}-k{n}" for n in range(2)]),
        "submitter": st.sampled_from([f"{prefix}-me", f"{prefix}-you"]),
        "kwargs": st.none() | st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3),
    }


@dataclass(frozen=True, repr=False)
class Request:
    """One generated submit, and whether every part of it was drawn from the valid values."""

    target: Any
    args: tuple[Any, ...]
    options: dict[str, Any]
    valid: bool
    again: bool
    """Send instead the request that made the job of this key, if any: the same job answers."""

    def __repr__(self) -> str:
        # reprlib stops at a few levels: a request may nest 100,000 deep.
        shown = reprlib.repr((self.target, self.args, self.options))
        return f"Request({shown}, valid={self.valid})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # how hypothesis prints a failing example

    def option(self, name: str, default: Any) -> Any:
        return self.options.get(name, default)

    def identity(self) -> str | None:
        """What an idempotency key stands for: everything but the one-off fields.

        None for a request too malformed to say (it must be refused anyway).
        """
        try:
            timeout = self.option("timeout", None)
            return _canonical(
                [
                    self.target,
                    list(self.args),
                    self.option("kwargs", None) or {},
                    self.option("queue", "default"),
                    self.option("priority", 0),
                    # Left out is not 3: a queue's default may say otherwise.
                    self.option("max_attempts", None),
                    None if timeout is None else float(timeout),
                    self.option("limits", None) or {},
                    sorted(set(self.option("labels", ()))),
                ]
            )
        except (TypeError, ValueError, RecursionError):
            return None


def _canonical(value: Any) -> str:
    """JSON in which True is not 1, 1 is not 1.0, and a tuple is the list it is stored as."""
    return json.dumps(value, sort_keys=True)


@st.composite
def requests(draw: st.DrawFn, prefix: str) -> Request:
    """Half of them valid in every part; the rest with one or two parts of any value at all."""
    valid = _valid_options(prefix)
    names = draw(st.sets(st.sampled_from(sorted(valid))))
    parts = [*sorted(names), "target", "args", "unknown option"]
    hostile = draw(st.sets(st.sampled_from(parts), min_size=1, max_size=2) | st.just(set()))
    options = {name: draw(ANY_VALUE if name in hostile else valid[name]) for name in sorted(names)}
    if "unknown option" in hostile:
        options[draw(st.sampled_from(UNKNOWN_OPTIONS))] = draw(ANY_VALUE)
    target = draw(
        ANY_VALUE if "target" in hostile else st.sampled_from([TARGET, "pkg.mod:Class.method"])
    )
    args = tuple(draw(st.lists(ANY_VALUE if "args" in hostile else JSON_VALUES, max_size=3)))
    again = draw(st.integers(0, 3)) == 0
    return Request(target, args, options, valid=not hostile, again=again)


@dataclass(frozen=True)
class Stored:
    """A job a key names, and the request that made it."""

    job_id: int
    request: Request


def _assert_stored_as_given(job: taskq.Job, request: Request, submitter: str) -> None:
    assert job.state is JobState.QUEUED
    assert job.queue == request.option("queue", "default")
    payload = {
        "target": request.target,
        "args": list(request.args),
        "kwargs": request.option("kwargs", None) or {},
    }
    assert _canonical(job.payload) == _canonical(payload)
    assert _canonical([job.priority, job.max_attempts, job.limits]) == _canonical(
        [
            request.option("priority", 0),
            request.option("max_attempts", None) or 3,
            request.option("limits", None) or {},
        ]
    )
    assert job.timeout == request.option("timeout", None)
    assert job.labels == tuple(sorted(set(request.option("labels", ()))))
    assert job.submitter == request.option("submitter", submitter)
    key = request.option("idempotency_key", None)
    if key is None:
        assert job.idempotency_key.startswith("auto:")
    else:
        assert job.idempotency_key == key
    run_at = request.option("run_at", None)
    if run_at is None:
        assert job.run_at == pytest.approx(job.created_at + request.option("delay", 0), abs=1e-3)
    else:
        assert job.run_at == run_at


def test_generated_submits_are_stored_exactly_or_refused_whole(
    client: taskq.Client, store: Store, prefix: str
) -> None:
    keys: dict[str, Stored] = {}
    for submitter in (f"{prefix}-you",):
        plan.run(store, submit_limit_set(submitter, LIMIT_RATE, 60))

    @settings(
        max_examples=80,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=requests(prefix))
    def submit_one(request: Request) -> None:
        key = request.option("idempotency_key", None)
        earlier = keys.get(key) if isinstance(key, str) else None
        if earlier is not None and request.again:
            request = earlier.request
        conflict = earlier is not None and earlier.request.identity() != request.identity()
        before = snapshot(store, prefix)
        try:
            handle = client.submit(request.target, *request.args, **request.options, unchecked=True)
        except errors.TaskqError as exc:
            refused: errors.TaskqError | None = exc
        else:
            refused = None
        if refused is not None:
            event(f"refused: {type(refused).__name__}")
            assert not request.valid or conflict, f"a valid submit was refused: {refused}"
            if conflict and isinstance(refused, errors.IdempotencyConflict):
                assert earlier is not None
                assert refused.job_id == earlier.job_id
            assert snapshot(store, prefix) == before
            return
        event("stored" if earlier is None else "stored: the key's job again")
        assert not conflict, "a key reused for another request returned the old job"
        if earlier is not None:
            assert handle.id == earlier.job_id
            request = earlier.request
        elif isinstance(key, str):
            keys[key] = Stored(handle.id, request)
        _assert_stored_as_given(client.get(handle.id), request, client.submitter)

    try:
        submit_one()
    finally:
        plan.run(store, submit_limit_remove(f"{prefix}-you"))
