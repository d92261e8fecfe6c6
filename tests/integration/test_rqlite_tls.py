"""The rqlites:// store end to end: a real 3-node rqlite cluster serving HTTPS.

The cluster's certificate comes from a throwaway CA made for the module;
the store is opened by URL as a user would, trusting that CA (``ca_file=``),
trusting nothing (``insecure=true``), or left with the system's trust, which
must fail quickly with a clear error.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

import taskq
from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.records import JobState
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store import Consistency, Statement, Store
from tests.support.rqlite_cluster import (
    RqliteCluster,
    TlsFiles,
    make_test_certificates,
    running_cluster,
)

T = TypeVar("T")

# Far longer than any call here takes (a failing one gives up in well under
# 10 s), far shorter than pytest's own timeout: a hang fails with its name.
_BOUND = 30.0
_CERT_FAILED = "certificate verify failed"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_test_certificates(tmp_path_factory.mktemp("tls") / "certs")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, certs: TlsFiles) -> Iterator[RqliteCluster]:
    with running_cluster(tmp_path_factory.mktemp("rqlite-tls"), size=3, tls=certs) as started:
        yield started


def _open(url: str) -> RqliteStore:
    """The store a user gets for ``url`` (schema migrated, so writes went over TLS already)."""
    store = open_store(url)
    assert isinstance(store, RqliteStore)
    assert store.target.tls
    return store


def _bounded(call: Callable[[], T], seconds: float = _BOUND) -> T:
    """``call()`` in a daemon thread; fails the test if it has not returned in time."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{call} still running after {seconds:g}s")
    if failure:
        raise failure[0]
    return outcome[0]


def _run_async(call: Callable[[], Awaitable[T]], seconds: float = _BOUND) -> T:
    async def bounded() -> T:
        with anyio.fail_after(seconds):
            return await call()

    return anyio.run(bounded)


def _round_trip(store: Store, table: str) -> None:
    """Blocking writes and reads at every consistency level, a large value included."""
    big = "ü" * 300_000  # a reply spread over many TLS records
    store.execute(
        [
            Statement(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT, note TEXT)"),
            Statement(
                f"INSERT INTO {table} (name, note) VALUES (:name, :note)",
                {"name": "a", "note": None},
            ),
            Statement(
                f"INSERT INTO {table} (name, note) VALUES (:name, :note)",
                {"name": "b", "note": "2nd"},
            ),
        ]
    )
    [result] = store.execute(
        [Statement(f"INSERT INTO {table} (name, note) VALUES ('big', :note)", {"note": big})]
    )
    assert (result.rows_affected, result.last_insert_id) == (1, 3)
    for level in (Consistency.WEAK, Consistency.LINEARIZABLE, Consistency.NONE):
        rows = store.query(
            Statement(f"SELECT id, name FROM {table} ORDER BY id"), consistency=level
        )
        assert rows == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "big"}]
    assert store.query(Statement(f"SELECT note FROM {table} WHERE id = 3")) == [{"note": big}]


async def _round_trip_async(store: Store, table: str) -> None:
    """The same through the async entry points, closing this loop's connections after."""
    try:
        big = "ß" * 300_000
        await store.execute_async(
            [
                Statement(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT)"),
                Statement(f"INSERT INTO {table} (note) VALUES ('first')"),
            ]
        )
        [result] = await store.execute_async(
            [Statement(f"INSERT INTO {table} (note) VALUES (:note)", {"note": big})]
        )
        assert result.last_insert_id == 2
        rows = await store.query_async(
            Statement(f"SELECT id, length(note) AS n FROM {table} ORDER BY id"),
            consistency=Consistency.LINEARIZABLE,
        )
        assert rows == [{"id": 1, "n": 5}, {"id": 2, "n": len(big)}]
        assert await store.query_async(Statement(f"SELECT note FROM {table} WHERE id = 2")) == [
            {"note": big}
        ]
    finally:
        await store.aclose()


@pytest.mark.rqlite
def test_a_store_trusting_the_ca_reads_and_writes(
    cluster: RqliteCluster, certs: TlsFiles, table: str
) -> None:
    url = cluster.store_url(ca_file=str(certs.ca))
    assert url.startswith("rqlites://")
    store = _bounded(lambda: _open(url))
    try:
        _bounded(lambda: _round_trip(store, table))
        _run_async(lambda: _round_trip_async(store, f"{table}_async"))
    finally:
        store.close()


@pytest.mark.rqlite
def test_a_follower_alone_leads_the_store_to_the_https_leader(
    cluster: RqliteCluster, certs: TlsFiles, table: str
) -> None:
    leader = cluster.wait_for_leader()
    follower = next(node for node in cluster.nodes if node is not leader)
    store = _bounded(lambda: _open(f"rqlites://{follower.http_addr}?ca_file={certs.ca}"))
    try:
        _bounded(lambda: _round_trip(store, table))
        nodes = _bounded(store.nodes)
        assert sorted(info.address for info in nodes) == sorted(
            node.base_url for node in cluster.nodes
        )
        assert all(info.address.startswith("https://") and info.reachable for info in nodes)
        assert [info.address for info in nodes if info.leader] == [leader.base_url]
        assert store.cluster.leader == leader.base_url
    finally:
        store.close()


@pytest.mark.rqlite
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_insecure_skips_verification(cluster: RqliteCluster, host: str, table: str) -> None:
    # The certificate names only 127.0.0.1: insecure must skip the name check too.
    port = cluster.nodes[0].http_port
    store = _bounded(lambda: _open(f"rqlites://{host}:{port}?insecure=true"))
    try:
        assert store.target.ca_file is None
        assert store.target.insecure
        _bounded(lambda: _round_trip(store, table))
        _run_async(lambda: _round_trip_async(store, f"{table}_async"))
    finally:
        store.close()


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that signed nothing the cluster serves."""
    return make_test_certificates(tmp_path_factory.mktemp("tls-other"), name="stranger").ca


def _untrusted_urls(cluster: RqliteCluster, certs: TlsFiles, other_ca: Path) -> dict[str, str]:
    port = cluster.nodes[0].http_port
    bounds = "retries=1&timeout=3"
    return {
        "system trust only": f"{cluster.url}?{bounds}",
        "another CA": f"{cluster.url}?{bounds}&ca_file={other_ca}",
        "a name the certificate lacks": f"rqlites://localhost:{port}?{bounds}&ca_file={certs.ca}",
    }


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("system trust only", "unable to get local issuer certificate"),
        ("another CA", "unable to get local issuer certificate"),
        ("a name the certificate lacks", "Hostname mismatch"),
    ],
)
@pytest.mark.rqlite
def test_an_unverified_certificate_fails_fast_and_clearly(
    cluster: RqliteCluster, certs: TlsFiles, other_ca: Path, case: str, reason: str
) -> None:
    url = _untrusted_urls(cluster, certs, other_ca)[case]
    store = open_store(url, migrate=False)
    try:
        insert = [Statement("CREATE TABLE never (a INTEGER)")]
        select = Statement("SELECT 1 AS one")
        calls: list[tuple[str, Callable[[], object]]] = [
            ("execute", lambda: store.execute(insert)),
            ("query", lambda: store.query(select)),
            ("execute_async", lambda: _run_async(lambda: store.execute_async(insert))),
            ("query_async", lambda: _run_async(lambda: store.query_async(select))),
        ]
        for name, call in calls:
            started = time.monotonic()
            # Unavailable, not OutcomeUnknown: the handshake failed before any request went out.
            with pytest.raises(errors.StoreUnavailable) as caught:
                _bounded(call)
            message = str(caught.value)
            assert _CERT_FAILED in message, (name, message)
            assert reason in message, (name, message)
            assert "SSLCertVerificationError" in message, (name, message)
            assert time.monotonic() - started < 15, name
    finally:
        store.close()


@pytest.mark.rqlite
def test_a_client_without_the_ca_fails_clearly(cluster: RqliteCluster) -> None:
    # Default options, as a user who forgot ca_file= would have them.
    started = time.monotonic()
    with pytest.raises(errors.StoreUnavailable, match=_CERT_FAILED):
        _bounded(lambda: taskq.Client(cluster.url))
    assert time.monotonic() - started < _BOUND


@pytest.mark.rqlite
def test_a_client_submits_and_reads_back_over_tls(cluster: RqliteCluster, certs: TlsFiles) -> None:
    queue = f"tls-{uuid.uuid4().hex[:10]}"
    url = cluster.store_url(ca_file=str(certs.ca))
    with _bounded(lambda: taskq.Client(url, submitter="tls-tester")) as client:
        handle = _bounded(
            lambda: client.submit("tests.support.jobs:add", 2, 3, queue=queue, unchecked=True)
        )
        job = _bounded(lambda: client.get(handle.id))
        assert (job.id, job.queue, job.state, job.submitter) == (
            handle.id,
            queue,
            JobState.QUEUED,
            "tls-tester",
        )
        assert (job.payload["target"], job.payload["args"]) == ("tests.support.jobs:add", [2, 3])
        assert [
            listed.id for listed in _bounded(lambda: client.list(taskq.JobQuery(queue=queue)))
        ] == [handle.id]

    async def submit_async() -> None:
        async with taskq.AsyncClient(url, submitter="tls-tester") as client:
            handle = await client.submit(
                "tests.support.jobs:add", 4, 5, queue=queue, unchecked=True
            )
            job = await client.get(handle.id)
            assert (job.state, job.payload["args"]) == (JobState.QUEUED, [4, 5])
            assert len(await client.list(taskq.JobQuery(queue=queue))) == 2

    _run_async(submit_async)


@pytest.fixture
def hang_up_port() -> Iterator[int]:
    """A loopback port whose listener reads the TLS hello, then hangs up (as a dying node)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    conn.recv(4096)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _hang_up_store(port: int) -> RqliteStore:
    url = f"rqlites://127.0.0.1:{port}?insecure=true&retries=1&timeout=3"
    store = open_store(url, migrate=False)
    assert isinstance(store, RqliteStore)
    return store


def test_a_handshake_cut_short_is_unavailable(hang_up_port: int) -> None:
    store = _hang_up_store(hang_up_port)
    try:
        # SSLEOFError, or SSLZeroReturnError "... closed (EOF)" with some Python/OpenSSL builds.
        with pytest.raises(errors.StoreUnavailable, match="EOF"):
            _bounded(lambda: store.query(Statement("SELECT 1")))
    finally:
        store.close()


def test_a_handshake_cut_short_is_unavailable_async(hang_up_port: int) -> None:
    store = _hang_up_store(hang_up_port)
    try:
        with pytest.raises(errors.StoreUnavailable, match="EOF"):
            _run_async(lambda: store.query_async(Statement("SELECT 1")))
    finally:
        store.close()
