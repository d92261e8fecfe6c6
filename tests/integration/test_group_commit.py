"""Concurrent submits of one client share writes (group commit), each caller its own outcome.

A gate in front of the store holds the first enqueue write open, so that the
other submits are known to wait behind it; the writes the store gets are
counted, not timed.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

import taskq
from taskq import errors
from taskq.broker.client import group_commit
from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Statement, StatementResult, Store
from tests.support.delegating_store import DelegatingStore

SUBMITTERS = 8
WAIT_SECONDS = 20.0


class GatedStore(DelegatingStore):
    """A store whose first enqueue write waits until :meth:`release`; it counts enqueue writes."""

    def __init__(self, inner: Store, *, fail_group_with: Exception | None = None) -> None:
        super().__init__(inner)
        self.enqueue_writes: list[int] = []  # the jobs each enqueue write carried
        self.entered = threading.Event()
        self._gate = threading.Event()
        self._fail_group_with = fail_group_with

    def release(self) -> None:
        self._gate.set()

    def _before_write(self, statements: Sequence[Statement]) -> None:
        inserts = [s for s in statements if s.sql.lstrip().startswith("INSERT INTO jobs")]
        if not inserts:
            return
        # One job on its own comes as its fields, one with parents as "spec", several as
        # "specs" (taskq/broker/ops/enqueue.py).
        params = inserts[0].params
        specs = params.get("specs", params.get("spec"))
        self.enqueue_writes.append(1 if "queue" in params else str(specs).count('"queue"'))
        if len(self.enqueue_writes) == 1:
            self.entered.set()
            assert self._gate.wait(WAIT_SECONDS), "the gate was never opened"
        elif self._fail_group_with is not None:
            raise self._fail_group_with

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        self._before_write(statements)
        return self.inner.execute(statements, idempotent=idempotent)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        await anyio.to_thread.run_sync(self._before_write, statements)
        return await self.inner.execute_async(statements, idempotent=idempotent)


def _wait_until_waiting(client: taskq.Client | taskq.AsyncClient, count: int) -> None:
    done = threading.Event()
    for _ in range(int(WAIT_SECONDS * 1000)):
        if client._group_commit.waiting() >= count:
            done.set()
            break
        done.wait(0.001)
    assert done.is_set(), f"{count} submits never came to wait for the write in flight"


class Submits:
    """Submits made in threads of one client: each one's id or error, by name."""

    def __init__(self, client: taskq.Client) -> None:
        self.client = client
        self.outcomes: dict[str, int | BaseException] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, *, rounds: int = 1, **options: Any) -> None:
        """Submit ``name`` ``rounds`` times in turn, in a thread; its last outcome is kept."""

        def submit() -> None:
            for _ in range(rounds):
                try:
                    self.outcomes[name] = self.client.submit(
                        "tests.support.jobs:echo", name, **options, unchecked=True
                    ).id
                except Exception as exc:
                    self.outcomes[name] = exc

        thread = threading.Thread(target=submit, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self, seconds: float = WAIT_SECONDS) -> None:
        for thread in self.threads:
            thread.join(seconds)
            assert not thread.is_alive(), "a submit never returned"


def _first_then_group(
    client: taskq.Client, gated: GatedStore, queue: str, names: list[str]
) -> Submits:
    """Submit "first", held open at the store, then ``names`` behind it; wait for them all."""
    submits = Submits(client)
    submits.start("first", queue=queue)
    assert gated.entered.wait(WAIT_SECONDS)
    for name in names:
        submits.start(name, queue=queue)
    _wait_until_waiting(client, len(names))
    gated.release()
    submits.join()
    return submits


def _stored(client: taskq.Client, queue: str) -> dict[str, list[int]]:
    """The ids of ``queue``'s jobs by their argument: each job stored once means one id each."""
    found: dict[str, list[int]] = {}
    for job in client.list(taskq.JobQuery(queue=queue, limit=1000)):
        found.setdefault(job.payload["args"][0], []).append(job.id)
    return found


@pytest.fixture
def queue() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def long_gathering(monkeypatch: pytest.MonkeyPatch) -> None:
    """A next group gathers until the callers expected are back: its time bound is never reached."""
    monkeypatch.setattr(group_commit, "GATHERING_SHARE", 1e9)
    monkeypatch.setattr(group_commit, "MOST_GATHERING_SECONDS", WAIT_SECONDS)


def test_threads_share_one_write_and_each_gets_its_own_job(store: Store, queue: str) -> None:
    gated = GatedStore(store)
    client = taskq.Client(store=gated, submitter="tester")
    names = [f"job-{number}" for number in range(SUBMITTERS - 1)]
    submits = _first_then_group(client, gated, queue, names)

    assert gated.enqueue_writes == [1, len(names)]  # the first alone, the rest in one write
    ids = [submits.outcomes[name] for name in ["first", *names]]
    assert all(isinstance(job_id, int) for job_id in ids)
    assert len(set(ids)) == SUBMITTERS
    assert _stored(client, queue) == {name: [submits.outcomes[name]] for name in ["first", *names]}


def test_a_bad_job_fails_alone_without_waiting(tmp_path: Any, queue: str) -> None:
    gated = GatedStore(open_store(f"sqlite://{tmp_path / 'q.db'}"))
    client = taskq.Client(store=gated, submitter="tester")
    submits = Submits(client)
    submits.start("first", queue=queue)
    assert gated.entered.wait(WAIT_SECONDS)
    submits.start("good", queue=queue)
    _wait_until_waiting(client, 1)
    # Refused while the write it would have joined is still held open: it waited for nothing.
    with pytest.raises(errors.InvalidJob, match="priority"):
        client.submit(
            "tests.support.jobs:echo", "bad", queue=queue, priority="high", unchecked=True
        )
    gated.release()
    submits.join()

    assert gated.enqueue_writes == [1, 1]
    assert set(_stored(client, queue)) == {"first", "good"}


def test_a_conflict_in_a_group_goes_to_its_caller_only(tmp_path: Any, queue: str) -> None:
    gated = GatedStore(open_store(f"sqlite://{tmp_path / 'q.db'}"))
    client = taskq.Client(store=gated, submitter="tester")
    taken = taskq.Client(store=gated.inner).submit(
        "tests.support.jobs:echo", "earlier", queue=queue, idempotency_key="taken", unchecked=True
    )
    submits = Submits(client)
    submits.start("first", queue=queue)
    assert gated.entered.wait(WAIT_SECONDS)
    submits.start("a", queue=queue)
    submits.start("clash", queue=queue, idempotency_key="taken")
    submits.start("again", queue=queue, idempotency_key="taken-too")
    _wait_until_waiting(client, 3)
    gated.release()
    submits.join()

    conflict = submits.outcomes["clash"]
    assert isinstance(conflict, errors.IdempotencyConflict)
    assert conflict.job_id == taken.id
    assert all(isinstance(submits.outcomes[name], int) for name in ("first", "a", "again"))
    # The group of three was refused whole, then its jobs went one by one.
    assert gated.enqueue_writes == [1, 3, 1, 1, 1]
    assert set(_stored(client, queue)) == {"earlier", "first", "a", "again"}


def test_a_store_failure_of_the_group_goes_to_every_caller(tmp_path: Any, queue: str) -> None:
    down = errors.StoreUnavailable("the store is down")
    gated = GatedStore(open_store(f"sqlite://{tmp_path / 'q.db'}"), fail_group_with=down)
    client = taskq.Client(store=gated, submitter="tester")
    submits = _first_then_group(client, gated, queue, ["a", "b", "c"])

    assert gated.enqueue_writes == [1, 3]  # not resent one by one: each would meet it too
    failures = [submits.outcomes[name] for name in ("a", "b", "c")]
    assert all(isinstance(failure, errors.StoreUnavailable) for failure in failures)
    assert len({id(failure) for failure in failures}) == 3  # an error object of its own each
    assert set(_stored(client, queue)) == {"first"}


def test_tasks_of_an_async_client_share_one_write(tmp_path: Any, queue: str) -> None:
    gated = GatedStore(open_store(f"sqlite://{tmp_path / 'q.db'}"))
    client = taskq.AsyncClient(store=gated, submitter="tester")
    outcomes: dict[str, int] = {}

    async def submit(name: str) -> None:
        outcomes[name] = (
            await client.submit("tests.support.jobs:echo", name, queue=queue, unchecked=True)
        ).id

    async def main() -> None:
        names = [f"job-{number}" for number in range(SUBMITTERS - 1)]
        with anyio.fail_after(WAIT_SECONDS):
            await submit_all(names)

    async def submit_all(names: list[str]) -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(submit, "first")
            await anyio.to_thread.run_sync(gated.entered.wait, WAIT_SECONDS)
            late = anyio.CancelScope()

            async def cancelled_while_waiting() -> None:
                with late:
                    await client.submit(
                        "tests.support.jobs:echo", "cancelled", queue=queue, unchecked=True
                    )

            tasks.start_soon(cancelled_while_waiting)
            for name in names:
                tasks.start_soon(submit, name)
            while client._group_commit.waiting() < SUBMITTERS:
                await anyio.sleep(0.001)
            late.cancel()
            while client._group_commit.waiting() > len(names):
                await anyio.sleep(0.001)
            gated.release()

    anyio.run(main)

    assert gated.enqueue_writes == [1, SUBMITTERS - 1]
    assert len(set(outcomes.values())) == SUBMITTERS
    stored = _stored(taskq.Client(store=gated.inner), queue)
    assert stored == {name: [job_id] for name, job_id in outcomes.items()}  # not "cancelled"


def test_a_group_over_the_submit_rate_is_written_one_by_one(tmp_path: Any, queue: str) -> None:
    gated = GatedStore(open_store(f"sqlite://{tmp_path / 'q.db'}"))
    client = taskq.Client(store=gated, submitter="tester")
    client.set_submit_limit("tester", 2, 3600)
    submits = _first_then_group(client, gated, queue, ["a", "b", "c"])

    # One token was left for the three: alone, each would have met the limit but one.
    assert gated.enqueue_writes == [1, 3, 1, 1, 1]
    outcomes = [submits.outcomes[name] for name in ("a", "b", "c")]
    assert sum(isinstance(outcome, int) for outcome in outcomes) == 1
    assert sum(isinstance(outcome, errors.RateLimited) for outcome in outcomes) == 2
    assert len(_stored(client, queue)) == 2


@pytest.mark.usefixtures("long_gathering")
def test_callers_of_a_shared_write_that_submit_again_share_the_next_one(
    store: Store, queue: str
) -> None:
    gated = GatedStore(store)
    client = taskq.Client(store=gated, submitter="tester")
    names = [f"job-{number}" for number in range(SUBMITTERS - 1)]
    submits = Submits(client)
    submits.start("first", queue=queue, rounds=3)
    assert gated.entered.wait(WAIT_SECONDS)
    for name in names:
        submits.start(name, queue=queue, rounds=2)
    _wait_until_waiting(client, len(names))
    gated.release()
    submits.join()

    # "first" alone; its second job with the others' first; its third with their second.
    assert gated.enqueue_writes == [1, SUBMITTERS, SUBMITTERS]
    stored = _stored(client, queue)
    assert {name: len(ids) for name, ids in stored.items()} == {
        "first": 3,
        **{name: 2 for name in names},
    }


@pytest.mark.usefixtures("long_gathering")
def test_a_lone_submitter_never_waits_for_a_group(store: Store, queue: str) -> None:
    gated = GatedStore(store)
    gated.release()
    client = taskq.Client(store=gated, submitter="tester")
    submits = Submits(client)
    submits.start("alone", queue=queue, rounds=3)
    submits.join(WAIT_SECONDS / 2)  # well before a gathering would have ended

    assert gated.enqueue_writes == [1, 1, 1]


@pytest.mark.usefixtures("long_gathering")
def test_a_gathering_caller_cancelled_hands_the_gathering_on(tmp_path: Any, queue: str) -> None:
    gated = GatedStore(open_store(f"sqlite://{tmp_path / 'q.db'}"))
    client = taskq.AsyncClient(store=gated, submitter="tester")
    outcomes: dict[str, int] = {}

    async def submit(name: str) -> None:
        outcomes[name] = (
            await client.submit("tests.support.jobs:echo", name, queue=queue, unchecked=True)
        ).id

    async def until_waiting(count: int) -> None:
        while client._group_commit.waiting() != count:
            await anyio.sleep(0.001)

    async def main() -> None:
        with anyio.fail_after(WAIT_SECONDS):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(submit, "first")
                await anyio.to_thread.run_sync(gated.entered.wait, WAIT_SECONDS)
                gathering = anyio.CancelScope()

                async def gathers_then_is_cancelled() -> None:
                    with gathering:
                        await submit("cancelled")

                tasks.start_soon(gathers_then_is_cancelled)
                await until_waiting(1)  # the first behind the write: it gathers the next group
                for name in ("a", "b"):
                    tasks.start_soon(submit, name)
                await until_waiting(3)
                gated.release()
                while "first" not in outcomes:  # its write ended: the next group gathers for 4
                    await anyio.sleep(0.001)
                gathering.cancel()
                await until_waiting(2)
                for name in ("c", "d"):  # "a" now gathers, and goes when four wait
                    tasks.start_soon(submit, name)

    anyio.run(main)

    assert gated.enqueue_writes == [1, 4]
    stored = _stored(taskq.Client(store=gated.inner), queue)
    assert stored == {name: [job_id] for name, job_id in outcomes.items()}
    assert set(stored) == {"first", "a", "b", "c", "d"}
