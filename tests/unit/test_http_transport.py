"""HttpTransport against a real, tiny HTTP server on the loopback interface.

The server runs in threads of the test process and answers each request with
bytes the test scripts, recording every request's raw bytes and which
connection it came on. Each behaviour is checked for both ways of sending: the
blocking ``send`` (run in a worker thread, as taskq's threads call it) and the
async ``send_async``, each inside ``anyio.run``.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pytest

from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure, SendStage
from taskq.broker.stores.http_transport import HttpTransport, TransportOptions

T = TypeVar("T")

# A bound on every wait, far above what any step needs on loopback.
PATIENCE = 5.0
POLL = 0.05

pytestmark = pytest.mark.timeout(30)


# -- a scripted server


@dataclass(frozen=True)
class Received:
    """One request as the server read it off the wire."""

    connection: int  # 1 for the first connection the server accepted, and so on
    raw: bytes

    @property
    def request_line(self) -> str:
        return self.raw.split(b"\r\n", 1)[0].decode("latin-1")

    @property
    def target(self) -> str:
        return self.request_line.split(" ")[1]

    @property
    def body(self) -> bytes:
        return self.raw.partition(b"\r\n\r\n")[2]


@dataclass(frozen=True)
class Answer:
    """What the server does with one request."""

    pieces: tuple[bytes, ...] = ()  # written one ``send`` each, ``gap`` seconds apart
    gap: float = 0.0
    close_after: bool = False  # close the connection once the pieces are written
    hang: bool = False  # never answer; hold the connection until the server stops


Script = Callable[[Received], Answer]


def reply_bytes(
    body: bytes,
    *,
    status: str = "200 OK",
    headers: tuple[str, ...] = ("Content-Type: application/json",),
) -> bytes:
    head = [f"HTTP/1.1 {status}", *headers, f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def echo(received: Received, *, headers: tuple[str, ...] = ()) -> bytes:
    """A JSON reply saying what was asked, and on which connection."""
    sent = received.body
    document = {
        "target": received.target,
        "connection": received.connection,
        "body": json.loads(sent) if sent else None,
    }
    return reply_bytes(
        json.dumps(document).encode(), headers=("Content-Type: application/json", *headers)
    )


def echo_script(received: Received) -> Answer:
    return Answer((echo(received),))


class ScriptedServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 whose answers come from ``script``."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.received: list[Received] = []
        self.accepted = 0
        self.closed = 0  # connections whose server side is closed
        self.errors: list[BaseException] = []
        acceptor = threading.Thread(target=self._accept_loop, name="scripted-accept", daemon=True)
        self._threads.append(acceptor)
        acceptor.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_until(self, condition: Callable[[], bool]) -> None:
        """Block until ``condition`` holds, failing the test after ``PATIENCE``."""
        with self._changed:
            if not self._changed.wait_for(condition, timeout=PATIENCE):
                raise AssertionError("the server never reached the expected state")

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        acceptor, *_ = self._threads
        acceptor.join(timeout=PATIENCE)  # after this, no connection thread is added
        for thread in self._threads[1:]:
            thread.join(timeout=PATIENCE)
        with self._changed:
            sockets = list(self._sockets)
        for sock in sockets:
            sock.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed by stop()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(POLL)
            with self._changed:
                self.accepted += 1
                number = self.accepted
                self._sockets.append(sock)
                self._changed.notify_all()
            thread = threading.Thread(
                target=self._serve, args=(sock, number), name=f"scripted-{number}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        buffer = bytearray()
        try:
            while not self._stop.is_set():
                raw = self._read_request(sock, buffer)
                if raw is None:
                    return
                received = Received(number, raw)
                with self._changed:
                    self.received.append(received)
                    self._changed.notify_all()
                answer = self._script(received)
                if answer.hang:
                    self._stop.wait(PATIENCE * 2)
                    return
                for index, piece in enumerate(answer.pieces):
                    if index and answer.gap and self._stop.wait(answer.gap):
                        return
                    sock.sendall(piece)
                if answer.close_after:
                    return
        except OSError:
            pass  # the client went away, as clients may
        except BaseException as exc:  # recorded so a broken script fails the test visibly
            self.errors.append(exc)
        finally:
            sock.close()
            with self._changed:
                self.closed += 1
                self._changed.notify_all()

    def _read_request(self, sock: socket.socket, buffer: bytearray) -> bytes | None:
        """One request's bytes, or None once the client closed or the server stops."""
        while b"\r\n\r\n" not in buffer:
            if not self._receive(sock, buffer):
                return None
        head_end = buffer.index(b"\r\n\r\n") + 4
        length = 0
        for line in bytes(buffer[:head_end]).split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(buffer) < head_end + length:
            if not self._receive(sock, buffer):
                return None
        raw = bytes(buffer[: head_end + length])
        del buffer[: head_end + length]
        return raw

    def _receive(self, sock: socket.socket, buffer: bytearray) -> bool:
        while not self._stop.is_set():
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return False
            if not data:
                return False
            buffer += data
            return True
        return False


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    """Start scripted servers; every one is stopped at teardown, whatever happened."""
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        server = ScriptedServer(script)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
    for server in servers:
        assert not server.errors, f"the scripted server failed: {server.errors!r}"


# -- the two ways of sending

Send = Callable[[HttpCall], Awaitable[HttpReply | SendFailure]]
Scenario = Callable[[Send], Awaitable[T]]


@dataclass
class Client:
    """One transport, sent through blocking ``send`` or async ``send_async``."""

    transport: HttpTransport
    mode: str

    async def send(self, call: HttpCall) -> HttpReply | SendFailure:
        if self.mode == "send":
            return await anyio.to_thread.run_sync(self.transport.send, call)
        return await self.transport.send_async(call)

    def run(self, scenario: Scenario[T]) -> T:
        async def main() -> T:
            try:
                return await scenario(self.send)
            finally:
                await self.transport.aclose()

        # The worker runs its loop on uvloop; the async transport must work on both.
        return anyio.run(main, backend_options={"use_uvloop": self.mode == "send_async-uvloop"})


@dataclass
class Clients:
    mode: str
    transports: list[HttpTransport] = field(default_factory=list)

    def __call__(self, **options: Any) -> Client:
        settings: dict[str, Any] = {"timeout": PATIENCE, "connect_timeout": PATIENCE}
        transport = HttpTransport(TransportOptions(**(settings | options)))
        self.transports.append(transport)
        return Client(transport, self.mode)


@pytest.fixture(
    params=[
        "send",
        "send_async",
        # uvloop is a dependency: the worker's loop, so the transport must work on it.
        "send_async-uvloop",
    ]
)
def client_for(request: pytest.FixtureRequest) -> Iterator[Clients]:
    """Clients sending the way the test's parameter says; their connections closed at the end."""
    clients = Clients(request.param)
    try:
        yield clients
    finally:
        for transport in clients.transports:
            transport.close()


def _reply(outcome: HttpReply | SendFailure) -> HttpReply:
    assert isinstance(outcome, HttpReply), f"expected a reply, got {outcome!r}"
    return outcome


def _failure(outcome: HttpReply | SendFailure) -> SendFailure:
    assert isinstance(outcome, SendFailure), f"expected a failure, got {outcome!r}"
    return outcome


async def _wait_until(server: ScriptedServer, condition: Callable[[], bool]) -> None:
    await anyio.to_thread.run_sync(server.wait_until, condition)


# -- the tests


def test_a_json_reply_comes_back_as_an_http_reply(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(echo_script)
    call = HttpCall("POST", server.url, "/db/execute", {"level": "strong"}, body=[["SELECT 1"]])

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(call)

    reply = _reply(client_for().run(scenario))
    assert reply.status == 200
    assert reply.data == {
        "target": "/db/execute?level=strong",
        "connection": 1,
        "body": [["SELECT 1"]],
    }
    assert reply.headers["content-type"] == "application/json"
    (received,) = server.received
    assert received.request_line == "POST /db/execute?level=strong HTTP/1.1"
    assert f"\r\nHost: 127.0.0.1:{server.port}\r\n".encode() in received.raw


def test_two_calls_in_a_row_share_one_connection(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(echo_script)

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        return [await send(HttpCall("GET", server.url, f"/call/{n}")) for n in (1, 2)]

    first, second = (_reply(outcome) for outcome in client_for().run(scenario))
    assert first.data["target"] == "/call/1"
    assert second.data["target"] == "/call/2"
    assert [r.connection for r in server.received] == [1, 1]
    assert server.accepted == 1


def test_a_reply_saying_connection_close_makes_the_next_call_open_a_new_connection(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    def closing(received: Received) -> Answer:
        return Answer((echo(received, headers=("Connection: close",)),), close_after=True)

    server = serve(closing)

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        return [await send(HttpCall("GET", server.url, f"/call/{n}")) for n in (1, 2)]

    first, second = (_reply(outcome) for outcome in client_for().run(scenario))
    assert first.data["connection"] == 1
    assert second.data["connection"] == 2
    assert [r.connection for r in server.received] == [1, 2]


def test_a_reply_saying_connection_close_is_not_reused_even_if_the_server_keeps_it_open(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(lambda received: Answer((echo(received, headers=("Connection: close",)),)))

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        return [await send(HttpCall("GET", server.url, f"/call/{n}")) for n in (1, 2)]

    first, second = (_reply(outcome) for outcome in client_for().run(scenario))
    assert first.data["connection"] == 1
    assert second.data["connection"] == 2


def test_an_idle_connection_the_server_closed_is_not_reused(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    # The reply says nothing of closing: the client keeps the connection,
    # and the server closes it while it sits idle in the pool.
    server = serve(lambda received: Answer((echo(received),), close_after=True))

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        first = await send(HttpCall("GET", server.url, "/call/1"))
        await _wait_until(server, lambda: server.closed >= 1)
        await anyio.sleep(0.1)  # let the FIN cross the loopback before the next call
        second = await send(HttpCall("GET", server.url, "/call/2"))
        return [first, second]

    first, second = (_reply(outcome) for outcome in client_for().run(scenario))
    assert first.data["connection"] == 1
    assert second.data["connection"] == 2
    assert [r.target for r in server.received] == ["/call/1", "/call/2"]


@pytest.mark.parametrize("base_url", ["", "ftp://127.0.0.1:21", "http://127.0.0.1:notaport"])
def test_a_call_to_no_usable_address_fails_as_not_sent(client_for: Clients, base_url: str) -> None:
    # rqlite lists an unreachable node with an empty address.
    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", base_url, "/status"))

    failure = _failure(client_for().run(scenario))
    assert failure.stage is SendStage.NOT_SENT


def test_a_refused_connection_fails_as_not_sent(client_for: Clients) -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]
    # Nobody listens on ``port`` now.

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", f"http://127.0.0.1:{port}", "/status"))

    failure = _failure(client_for().run(scenario))
    assert failure.stage is SendStage.NOT_SENT
    assert "ConnectionRefusedError" in failure.message
    assert failure.refused  # nothing listens: the node is down, not slow


@pytest.mark.timeout(15)
def test_a_server_that_never_answers_fails_as_sent_and_timed_out(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(lambda received: Answer(hang=True))

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("POST", server.url, "/db/execute", body=[], timeout=0.3))

    failure = _failure(client_for().run(scenario))
    assert failure.stage is SendStage.SENT
    assert "timed out" in failure.message
    assert len(server.received) == 1


@pytest.mark.timeout(15)
def test_a_reply_trickling_in_past_the_time_limit_fails_as_timed_out(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    # Every byte comes well within the limit, the whole reply never does.
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
    server = serve(lambda received: Answer((head, *[b"x"] * 100), gap=0.1))

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", server.url, "/status", timeout=0.5))

    failure = _failure(client_for().run(scenario))
    assert failure.stage is SendStage.SENT
    assert "timed out" in failure.message


@pytest.mark.timeout(15)
def test_a_node_that_cannot_take_the_connection_in_time_fails_as_not_sent(
    client_for: Clients,
) -> None:
    # A listener that never accepts, its queue filled: further connects get no answer.
    with socket.create_server(("127.0.0.1", 0), backlog=0) as listener:
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(listener.getsockname())
            url = f"http://127.0.0.1:{listener.getsockname()[1]}"
            client = client_for(connect_timeout=0.3)

            async def scenario(send: Send) -> HttpReply | SendFailure:
                return await send(HttpCall("GET", url, "/status"))

            failure = _failure(client.run(scenario))
        finally:
            for filler in fillers:
                filler.close()
    assert failure.stage is SendStage.NOT_SENT
    assert "timed out" in failure.message
    assert not failure.refused


@pytest.mark.timeout(15)
def test_a_call_that_timed_out_leaves_no_connection_for_the_next_call(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    def hang_once(received: Received) -> Answer:
        return Answer(hang=True) if received.target == "/slow" else Answer((echo(received),))

    server = serve(hang_once)

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        slow = await send(HttpCall("GET", server.url, "/slow", timeout=0.3))
        fast = await send(HttpCall("GET", server.url, "/fast"))
        return [slow, fast]

    slow, fast = client_for().run(scenario)
    assert _failure(slow).stage is SendStage.SENT
    assert _reply(fast).data["connection"] == 2


def test_a_server_that_closes_without_answering_fails_as_sent(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(lambda received: Answer(close_after=True))

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("POST", server.url, "/db/execute", body=[]))

    failure = _failure(client_for().run(scenario))
    assert failure.stage is SendStage.SENT
    assert len(server.received) == 1


def test_a_garbled_reply_fails_as_sent(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(lambda received: Answer((b"SSH-2.0-OpenSSH_9.6\r\n\r\n",)))

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", server.url, "/status"))

    failure = _failure(client_for().run(scenario))
    assert failure.stage is SendStage.SENT
    assert "ReplyInvalid" in failure.message


def test_a_chunked_reply_split_across_several_writes_is_read_whole(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    pieces = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n",
        b"\r\n8\r\n",
        b'{"nodes"',
        b"\r\n9;x=1\r\n: [1,",  # this chunk's data ends in the next write
        b" 2]}\r\n0\r\n",
        b"X-Trailer: t\r\n\r\n",
    )
    server = serve(lambda received: Answer(pieces, gap=0.02))

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        # The second call proves the first reply was consumed exactly, trailer included.
        return [await send(HttpCall("GET", server.url, "/nodes")) for _ in range(2)]

    first, second = (_reply(outcome) for outcome in client_for().run(scenario))
    assert first.data == {"nodes": [1, 2]}
    assert second.data == {"nodes": [1, 2]}
    assert server.accepted == 1


def test_a_reply_larger_than_one_read_is_read_whole(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    rows = [[n, "x" * 100] for n in range(3000)]  # about 330 kB
    body = json.dumps({"results": [{"values": rows}]}).encode()
    server = serve(lambda received: Answer((reply_bytes(body),)))

    async def scenario(send: Send) -> list[HttpReply | SendFailure]:
        return [await send(HttpCall("GET", server.url, "/db/query")) for _ in range(2)]

    first, second = (_reply(outcome) for outcome in client_for().run(scenario))
    assert first.data["results"][0]["values"] == rows
    assert second.text == first.text
    assert server.accepted == 1


def test_a_reply_without_a_length_is_read_until_the_server_closes(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    pieces = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[1,", b" 2]")
    server = serve(lambda received: Answer(pieces, gap=0.02, close_after=True))

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", server.url, "/status"))

    assert _reply(client_for().run(scenario)).data == [1, 2]


def test_basic_credentials_reach_the_server(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(echo_script)

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", server.url, "/status"))

    _reply(client_for(username="ann", password="s3cret").run(scenario))
    token = base64.b64encode(b"ann:s3cret")
    (received,) = server.received
    assert b"\r\nAuthorization: Basic " + token + b"\r\n" in received.raw


def test_no_credentials_send_no_authorization(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    server = serve(echo_script)

    async def scenario(send: Send) -> HttpReply | SendFailure:
        return await send(HttpCall("GET", server.url, "/status"))

    _reply(client_for().run(scenario))
    (received,) = server.received
    assert b"authorization:" not in received.raw.lower()


def test_concurrent_calls_each_get_their_own_reply(
    serve: Callable[[Script], ScriptedServer], client_for: Clients
) -> None:
    count = 5
    # No request is answered until all five are in: the calls must really overlap.
    together = threading.Barrier(count, timeout=PATIENCE)

    def after_all_arrived(received: Received) -> Answer:
        together.wait()
        return Answer((echo(received),))

    server = serve(after_all_arrived)
    outcomes: dict[int, HttpReply | SendFailure] = {}

    async def scenario(send: Send) -> None:
        async def one(n: int) -> None:
            outcomes[n] = await send(HttpCall("GET", server.url, f"/call/{n}"))

        async with anyio.create_task_group() as group:
            for n in range(count):
                group.start_soon(one, n)

    client_for().run(scenario)
    assert sorted(outcomes) == list(range(count))
    for n, outcome in outcomes.items():
        assert _reply(outcome).data["target"] == f"/call/{n}"
    assert len({r.connection for r in server.received}) == count
