"""What only the HTTP client has to show: errors carried back, the token's name, the default client.

The rest of its behaviour is the store clients' (tests/integration/test_client.py
runs those tests over HTTP too).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import taskq
from taskq import errors
from taskq.broker.client.client import CancelResult
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.records import JobState, Lease
from taskq.dev.server import ServerProcess, token_of
from tests.support import declared_jobs
from tests.support.declared_store import declaration, names, serving
from tests.support.reports import completed, failed, report_one

NO_SUCH_JOB = 999_999


@pytest.fixture
def server(served: tuple[str, ServerProcess]) -> ServerProcess:
    return served[1]


@pytest.fixture
def on_store(served: tuple[str, ServerProcess]) -> Iterator[taskq.Client]:
    with taskq.Client(served[0]) as client:
        yield client


@pytest.fixture
def queue() -> str:
    return f"h-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(server: ServerProcess) -> Iterator[taskq.Client]:
    with taskq.Client(server.url, token=token_of("tester")) as over_http:
        yield over_http


def _claimed(on_store: taskq.Client, queue: str, count: int) -> dict[int, Lease]:
    """The leases of ``count`` jobs of ``queue`` by job id, claimed by a stand-in: running."""
    claimed = plan.run(
        on_store.store, job_claim("stand-in", [queue], limit=count, lease_seconds=60)
    )
    assert len(claimed) == count
    return {job.lease.job_id: job.lease for job in claimed}


def test_the_submitter_is_the_tokens_name(server: ServerProcess, queue: str) -> None:
    with taskq.Client(server.url, token=token_of("tester"), submitter="someone") as client:
        handle = client.submit("m:f", queue=queue, unchecked=True)
        assert client.get(handle.id).submitter == "tester"
        with pytest.raises(errors.InvalidJob, match="token") as caught:
            client.submit("m:f", queue=queue, submitter="someone")
        assert caught.value.field == "submitter"


def test_a_refusal_raises_the_stores_error(server: ServerProcess, queue: str) -> None:
    with taskq.Client(server.url, token=token_of("tester")) as client:
        key = f"once-{queue}"
        first = client.submit("m:f", 1, queue=queue, idempotency_key=key, unchecked=True)
        assert client.submit("m:f", 1, queue=queue, idempotency_key=key, unchecked=True).id == (
            first.id
        )
        with pytest.raises(errors.IdempotencyConflict) as conflict:
            client.submit("m:f", 2, queue=queue, idempotency_key=key, unchecked=True)
        assert (conflict.value.field, conflict.value.job_id) == ("idempotency_key", first.id)
        with pytest.raises(errors.InvalidJob, match="priority") as invalid:
            client.submit_many([taskq.call_spec("m:f", queue=queue, priority=2**40)])
        assert invalid.value.field == "priority"
        with pytest.raises(errors.UnknownFunction):
            client.submit_many("nobody.declares:this", [(1,), (2,)])
        # Importable in both processes, but the server never imports what a name says.
        with pytest.raises(errors.UnknownFunction, match="no worker has declared"):
            client.submit("tests.support.importable_jobs:resize_over_http", "a.png", queue=queue)
        assert [job.id for job in client.list(taskq.JobQuery(queue=queue))] == [first.id]


def test_a_submitter_over_its_rate_is_told_when_to_come_back(
    server: ServerProcess, on_store: taskq.Client, queue: str
) -> None:
    on_store.set_submit_limit("tester", 1, 3600)
    try:
        with (
            taskq.Client(server.url, token=token_of("tester")) as client,
            pytest.raises(errors.RateLimited) as caught,
        ):
            client.submit_many([taskq.call_spec("m:f", [n], queue=queue) for n in range(3)])
    finally:
        on_store.remove_submit_limit("tester")
    assert caught.value.retry_after is None  # three jobs never fit a limit of one
    assert on_store.list(taskq.JobQuery(queue=queue)) == []


def test_submit_many_of_no_jobs_submits_none_as_on_a_store(
    client: taskq.Client, on_store: taskq.Client
) -> None:
    # The server refuses an empty batch (a 422): the client sends none.
    assert client.submit_many([]) == on_store.submit_many([]) == []


def test_a_client_without_a_token_is_told_to_pass_one(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TASKQ_TOKEN", raising=False)
    with taskq.Client(server.url) as tokenless, pytest.raises(errors.Unauthorized) as refused:
        tokenless.get(1)
    assert str(refused.value) == (
        "this server wants a token: pass it as token= (taskq.Client(url, token=...)) "
        "or set TASKQ_TOKEN"
    )


def test_https_to_a_server_of_plain_http_says_to_use_http(server: ServerProcess) -> None:
    # The server answers the handshake with a 400 in plain HTTP: a URL to fix, said at once,
    # not a server that does not answer, asked again until the call's time runs out.
    plain = server.url
    secure = plain.replace("http://", "https://")
    with (
        taskq.Client(secure, token=token_of("tester"), timeout=30) as mistaken,
        pytest.raises(errors.ConfigError) as refused,
    ):
        mistaken.get(1)
    assert str(refused.value) == (
        f"taskq serve at {secure}: the server speaks plain HTTP, not HTTPS (it answered the "
        f"TLS handshake in plain text); use {plain}"
    )


def test_a_token_is_checked(server: ServerProcess, queue: str) -> None:
    with (
        taskq.Client(server.url, token="not-a-token") as stranger,
        pytest.raises(errors.Unauthorized),
    ):
        stranger.get(1)
    with taskq.Client(server.url, token=token_of("reader")) as reader:
        with pytest.raises(errors.Forbidden, match="submit"):
            reader.submit("m:f", queue=queue, unchecked=True)
        # Settings are read with a token that reads, and changed only with one that administers.
        assert isinstance(reader.submit_limits(), list)
        with pytest.raises(errors.Forbidden, match="admin"):
            reader.set_submit_limit(f"someone-{queue}", 1, 60)
        with pytest.raises(errors.Forbidden, match="admin"):
            reader.prune(older_than=3600)


def test_what_needs_the_store_says_so(server: ServerProcess) -> None:
    with taskq.Client(server.url, token=token_of("tester")) as client:
        with pytest.raises(errors.NotOverHttp, match="execution_stats"):
            client.execution_stats()
        with pytest.raises(errors.NotOverHttp, match="shell"):
            client.submit_shell("true")
        with pytest.raises(errors.NotOverHttp, match="has no store"):
            client.store.close()


def test_an_unknown_option_of_a_submit_by_name_is_refused_in_the_clients_words(
    client: taskq.Client,
) -> None:
    # As a store client says it: what the options are, and where keyword arguments go.
    with pytest.raises(errors.InvalidJob) as refused:
        client.submit("lab.jobs:ticker", 2, quue="gpu")
    assert str(refused.value).startswith("unknown option(s) quue (did you mean queue?); ")
    assert "kwargs={'quue': ...}" in str(refused.value)


def test_an_unknown_queue_is_refused_in_the_clients_words(client: taskq.Client, queue: str) -> None:
    for change, what in (
        (lambda: client.pause(queue), "pause it"),
        (lambda: client.resume(queue), "resume it"),
        (lambda: client.set_queue_limits(queue, max_running=2), "set its limits"),
    ):
        with pytest.raises(errors.QueueNotFound) as refused:
            change()
        # The server's answer names its body's member; the Python client, its argument.
        assert str(refused.value) == (
            f"no queue named {queue!r}: it has no jobs and no settings; to {what} all the "
            "same, ask to create it (create=True)"
        )


def test_the_declared_jobs_are_listed_over_http(
    client: taskq.Client, on_store: taskq.Client
) -> None:
    name, queue = names()
    worker_id = serving(on_store, "w1", [queue], declaration(name, queue=queue))
    [listed] = [each for each in client.functions() if each.name == name]
    assert listed == next(each for each in on_store.functions() if each.name == name)
    assert (listed.queue, listed.live, listed.workers) == (queue, True, (worker_id,))


def test_a_value_of_the_wrong_type_is_refused_over_http_with_nothing_written(
    client: taskq.Client, on_store: taskq.Client
) -> None:
    """The server checks the values as it decoded them from the body's JSON."""
    name, queue = names()
    serving(on_store, "w1", [queue], declaration(name, queue=queue))
    with pytest.raises(errors.InvalidJob) as refused:
        client.submit(name, 5)
    assert str(refused.value) == (
        f"{name}(path: str, *, lower: bool = True) refuses these arguments: "
        "path: str was given 5, an int"
    )
    assert refused.value.field == "args"
    with pytest.raises(errors.InvalidJob, match="lower: bool was given 1, an int"):
        client.submit(name, "in.txt", kwargs={"lower": 1})
    assert on_store.list(taskq.JobQuery(queue=queue)) == []
    handle = client.submit(name, "in.txt", kwargs={"lower": False})
    assert on_store.get(handle.id).payload["kwargs"] == {"lower": False}


def test_a_declared_job_submits_over_http_when_the_store_url_names_a_server(
    server: ServerProcess, on_store: taskq.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKQ_STORE", server.url)
    monkeypatch.setenv("TASKQ_TOKEN", token_of("tester"))
    taskq.set_default_client(None)
    try:
        handle = declared_jobs.greet.submit("ada", greeting="hi")
        assert taskq.default_client().http is not None
    finally:
        taskq.set_default_client(None)
    job = on_store.get(handle.id)
    assert (job.submitter, job.queue, job.max_attempts, job.labels) == (
        "tester",
        "declared",
        2,
        ("test",),
    )
    assert (job.payload["args"], job.payload["kwargs"]) == (["ada"], {"greeting": "hi"})


def test_a_cancel_of_many_with_an_unknown_id_cancels_none(
    client: taskq.Client, on_store: taskq.Client, queue: str
) -> None:
    first, second = client.submit_many([taskq.call_spec("m:f", [n], queue=queue) for n in (1, 2)])
    with pytest.raises(errors.JobNotFound, match=f"^no job with id {NO_SUCH_JOB}$"):
        client.cancel(first.id, second.id, NO_SUCH_JOB)
    assert [on_store.get(handle.id).state for handle in (first, second)] == [JobState.QUEUED] * 2
    assert client.cancel(first.id, second.id) == CancelResult((first.id, second.id), ())


def test_a_retry_of_many_with_an_unknown_id_retries_none(
    client: taskq.Client, on_store: taskq.Client, queue: str
) -> None:
    first, second = client.submit_many([taskq.call_spec("m:f", [n], queue=queue) for n in (1, 2)])
    for lease in _claimed(on_store, queue, 2).values():
        plan.run(on_store.store, report_one(failed(lease, {"type": "E"}, retryable=False)))
    with pytest.raises(errors.JobNotFound, match=f"^no job with id {NO_SUCH_JOB}$"):
        client.retry(first.id, NO_SUCH_JOB, second.id)
    assert [on_store.get(handle.id).state for handle in (first, second)] == [JobState.FAILED] * 2
    assert client.retry(second.id, first.id, first.id) == [first.id, second.id]
    assert [on_store.get(handle.id).state for handle in (first, second)] == [JobState.QUEUED] * 2


def test_a_retry_names_the_jobs_it_brought_back_as_on_the_store(
    client: taskq.Client, on_store: taskq.Client, queue: str
) -> None:
    [parent] = client.submit_many([taskq.call_spec("m:f", [1], queue=queue)])
    [child] = client.submit_many([taskq.call_spec("m:f", [2], queue=queue, after=[parent.id])])
    client.cancel(parent.id)  # cancels the child waiting on it
    moved = client.retry(parent.id)
    assert (moved, moved.revived) == ([parent.id], (child.id,))
    assert on_store.get(child.id).state is JobState.WAITING


def test_a_mixed_cancel_answers_as_on_the_store(
    client: taskq.Client, on_store: taskq.Client, queue: str
) -> None:
    # The same batch twice, one cancelled over HTTP and one on the store: the same answer.
    for name, cancel in (("http", client.cancel), ("store", on_store.cancel)):
        batch = f"{queue}-{name}"
        running, ended = [on_store.submit("m:f", n, queue=batch, unchecked=True) for n in (1, 2)]
        leases = _claimed(on_store, batch, 2)
        plan.run(on_store.store, report_one(completed(leases[ended.id], None)))
        queued = on_store.submit("m:f", 3, queue=batch, unchecked=True)
        answer = cancel(queued.id, running.id, ended.id)
        assert answer == CancelResult(cancelled=(queued.id,), requested=(running.id,)), name
        job = on_store.get(running.id)
        assert (job.state, job.cancel_requested) == (JobState.RUNNING, True)
        assert on_store.get(ended.id).state is JobState.SUCCEEDED
