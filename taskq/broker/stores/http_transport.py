"""Moving HTTP calls over kept-alive connections, blocking or async.

One :class:`HttpTransport` holds a pool of open connections per node for
blocking callers and another for async ones; both write the request from
:mod:`taskq.broker.stores.http_wire` and read until its reader has the whole reply.
Every way a call can fail comes back as a :class:`SendFailure` saying how
far the request got, which decides whether resending it is safe: a failed
connect never reached the node, anything after the first byte went out may
have been acted on.
"""

from __future__ import annotations

import base64
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.lowlevel

from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure, SendStage
from taskq.broker.stores.http_wire import Endpoint, ReplyInvalid, ReplyReader, encode_request

# Enough for a worker's concurrent calls (claims, reports, heartbeats,
# maintenance, progress) to one node; more are closed when they come back.
_IDLE_PER_NODE = 32
_READ_SIZE = 65536


@dataclass(frozen=True)
class TransportOptions:
    """How to reach the nodes: time limits, credentials and TLS trust."""

    timeout: float
    connect_timeout: float
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    insecure: bool = False

    def authorization(self) -> str | None:
        if self.username is None:
            return None
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        return f"Basic {token}"

    def ssl_context(self) -> ssl.SSLContext:
        if self.insecure:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        return ssl.create_default_context(cafile=self.ca_file)


class HttpTransport:
    """Sends :class:`HttpCall` s and returns what came back, from threads or tasks."""

    def __init__(self, options: TransportOptions) -> None:
        self.options = options
        self._authorization = options.authorization()
        self._ssl: ssl.SSLContext | None = None
        self._endpoints: dict[str, Endpoint] = {}
        self._idle_sockets: dict[Endpoint, list[socket.socket]] = {}
        # Streams belong to the event loop that opened them: one pool per loop run.
        self._stream_pools: anyio.lowlevel.RunVar[dict[Endpoint, list[anyio.abc.ByteStream]]] = (
            anyio.lowlevel.RunVar(f"taskq-http-streams-{id(self)}")
        )
        self._lock = threading.Lock()  # blocking callers may share the transport across threads

    # -- shared by both ways of sending

    def _prepare(self, call: HttpCall) -> tuple[Endpoint, bytes, float]:
        endpoint = self._endpoints.get(call.base_url)
        if endpoint is None:
            endpoint = self._endpoints[call.base_url] = Endpoint.of(call.base_url)
        request = encode_request(call, endpoint, self._authorization)
        timeout = call.timeout if call.timeout is not None else self.options.timeout
        return endpoint, request, timeout

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = self.options.ssl_context()
        return self._ssl

    def _connect_timeout(self, timeout: float) -> float:
        return min(self.options.connect_timeout, timeout)

    # -- blocking

    def send(self, call: HttpCall) -> HttpReply | SendFailure:
        """Send ``call`` and wait for its reply, within the call's time limit."""
        try:
            endpoint, request, timeout = self._prepare(call)
        except ValueError as exc:
            return SendFailure(SendStage.NOT_SENT, str(exc))
        deadline = time.monotonic() + timeout
        try:
            sock = self._idle_socket(endpoint) or self._open_socket(endpoint, timeout)
        except OSError as exc:
            return _failure(SendStage.NOT_SENT, exc)
        reader = ReplyReader(call.method)
        try:
            sock.settimeout(timeout)
            sock.sendall(request)
            reply = None
            while reply is None:
                sock.settimeout(max(deadline - time.monotonic(), 0.0) or 1e-6)
                data = sock.recv(_READ_SIZE)
                reply = reader.feed(data) if data else reader.end_of_stream()
        except (OSError, ReplyInvalid) as exc:
            sock.close()
            return _failure(SendStage.SENT, exc)
        if reader.keep_alive:
            self._keep_socket(endpoint, sock)
        else:
            sock.close()
        return reply

    def _open_socket(self, endpoint: Endpoint, timeout: float) -> socket.socket:
        sock = socket.create_connection(
            (endpoint.host, endpoint.port), timeout=self._connect_timeout(timeout)
        )
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.tls:
                return self._tls().wrap_socket(sock, server_hostname=endpoint.host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _idle_socket(self, endpoint: Endpoint) -> socket.socket | None:
        while True:
            with self._lock:
                idle = self._idle_sockets.get(endpoint)
                if not idle:
                    return None
                sock = idle.pop()
            if _still_open(sock):
                return sock
            sock.close()

    def _keep_socket(self, endpoint: Endpoint, sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle_sockets.setdefault(endpoint, [])
            if len(idle) < _IDLE_PER_NODE:
                idle.append(sock)
                return
        sock.close()

    def close(self) -> None:
        """Close the blocking connections (the async ones go with :meth:`aclose`)."""
        with self._lock:
            sockets = [sock for idle in self._idle_sockets.values() for sock in idle]
            self._idle_sockets.clear()
        for sock in sockets:
            sock.close()

    # -- async

    async def send_async(self, call: HttpCall) -> HttpReply | SendFailure:
        """As :meth:`send`, for an anyio task."""
        try:
            endpoint, request, timeout = self._prepare(call)
        except ValueError as exc:  # no address: a node the cluster reports but cannot reach
            return SendFailure(SendStage.NOT_SENT, str(exc))
        try:
            stream = await self._idle_stream(endpoint)
            if stream is None:
                with anyio.fail_after(self._connect_timeout(timeout)):
                    stream = await self._open_stream(endpoint)
        except (OSError, TimeoutError, anyio.BrokenResourceError) as exc:
            # BrokenResourceError: the node hung up during the TLS handshake.
            return _failure(SendStage.NOT_SENT, exc)
        reader = ReplyReader(call.method)
        reply = None
        try:
            with anyio.fail_after(timeout):
                await stream.send(request)
                while reply is None:
                    try:
                        data = await stream.receive(_READ_SIZE)
                    except anyio.EndOfStream:
                        reply = reader.end_of_stream()
                    else:
                        reply = reader.feed(data)
        except (OSError, TimeoutError, ReplyInvalid, anyio.BrokenResourceError) as exc:
            return _failure(SendStage.SENT, exc)
        finally:
            # A call cut short (failed, or its task cancelled) leaves the
            # connection mid-exchange: it can carry nothing else.
            if reply is not None and reader.keep_alive:
                await self._keep_stream(endpoint, stream)
            else:
                await anyio.aclose_forcefully(stream)
        return reply

    async def _open_stream(self, endpoint: Endpoint) -> anyio.abc.ByteStream:
        if endpoint.tls:
            return await anyio.connect_tcp(
                endpoint.host, endpoint.port, tls=True, ssl_context=self._tls()
            )
        return await anyio.connect_tcp(endpoint.host, endpoint.port)

    def _idle_streams(self) -> dict[Endpoint, list[anyio.abc.ByteStream]]:
        try:
            return self._stream_pools.get()
        except LookupError:
            pools: dict[Endpoint, list[anyio.abc.ByteStream]] = {}
            self._stream_pools.set(pools)
            return pools

    async def _idle_stream(self, endpoint: Endpoint) -> anyio.abc.ByteStream | None:
        idle = self._idle_streams().get(endpoint)
        while idle:
            stream = idle.pop()
            raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
            if raw is not None and _still_open(raw):
                return stream
            await anyio.aclose_forcefully(stream)
        return None

    async def _keep_stream(self, endpoint: Endpoint, stream: anyio.abc.ByteStream) -> None:
        idle = self._idle_streams().setdefault(endpoint, [])
        if len(idle) < _IDLE_PER_NODE:
            idle.append(stream)
        else:
            await anyio.aclose_forcefully(stream)

    async def aclose(self) -> None:
        """Close the blocking connections and those this event loop opened."""
        self.close()
        pools = self._idle_streams()
        streams = [stream for idle in pools.values() for stream in idle]
        pools.clear()
        for stream in streams:
            await anyio.aclose_forcefully(stream)


def _still_open(sock: socket.socket) -> bool:
    """Whether an idle kept-alive connection can carry a request.

    Between requests the node has nothing to say: a readable socket means it
    closed the connection (or broke the protocol), so the connection is done.
    """
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def _failure(stage: SendStage, exc: BaseException) -> SendFailure:
    refused = stage is SendStage.NOT_SENT and _refused(exc)
    if isinstance(exc.__cause__, OSError):
        exc = exc.__cause__  # anyio's "all connection attempts failed" wraps the reason
    detail = str(exc) or "no detail"
    if isinstance(exc, TimeoutError | socket.timeout):
        detail = "timed out"
    return SendFailure(stage, f"{type(exc).__name__}: {detail}", refused=refused)


def _refused(exc: BaseException) -> bool:
    """Whether every address of the node refused the connection.

    anyio tries each address a host name resolves to and raises one error
    whose cause is the failure, or a group of them when there were several.
    """
    if isinstance(exc, ConnectionRefusedError):
        return True
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        return all(_refused(one) for one in cause.exceptions)
    return cause is not None and _refused(cause)
