"""HTTP/1.1 as bytes, with no I/O: a request to send, and a reply read incrementally.

rqlite speaks plain HTTP/1.1 with JSON bodies, and taskq asks it only a few
kinds of question: POST a JSON array, GET a status document. A general client
(httpx) spends about a millisecond of CPU on each such request, ten times
what the bytes need; an idle worker polling rqlite spent most of its time
there. This module does the little HTTP that taskq needs, for both the
blocking and the async transport: a request's bytes out, and bytes in until
a whole reply has arrived (``Content-Length``, chunked, or until close).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from taskq import fast_json
from taskq.broker.stores.http_plan import HttpCall, HttpReply

_MAX_HEAD_BYTES = 64 * 1024


class ReplyInvalid(Exception):
    """The node's bytes are not an HTTP/1.1 reply we can read."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a base URL points: host, port and whether to speak TLS."""

    host: str
    port: int
    tls: bool

    @classmethod
    def of(cls, base_url: str) -> Endpoint:
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        tls = parts.scheme == "https"
        port = parts.port if parts.port is not None else (443 if tls else 80)
        return cls(parts.hostname, port, tls)

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def encode_request(call: HttpCall, endpoint: Endpoint, authorization: str | None) -> bytes:
    """The bytes of ``call`` as an HTTP/1.1 request that keeps the connection open."""
    target = call.path
    if call.params:
        target += "?" + _query_string(tuple(call.params.items()))
    lines = [f"{call.method} {target} HTTP/1.1", f"Host: {endpoint.authority}"]
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    body = b""
    if call.body is not None:
        # Compact: every byte of a write is read, logged and sent on by each node of
        # an rqlite cluster (about 0.2 us of the nodes' CPU a byte, measured).
        body = fast_json.dumps(call.body)
        lines.append("Content-Type: application/json")
    if call.body is not None or call.method not in {"GET", "HEAD"}:
        lines.append(f"Content-Length: {len(body)}")
    head = "\r\n".join(lines) + "\r\n\r\n"
    return head.encode("latin-1") + body


@functools.lru_cache(maxsize=64)
def _query_string(params: tuple[tuple[str, str], ...]) -> str:
    """``params`` urlencoded, once per set: a store sends the same few sets, and
    encoding one anew took 2.9 us, remembering it 0.3 us."""
    return urlencode(params)


class ReplyReader:
    """Bytes in, one reply out: ``feed`` what arrives until it returns the reply.

    ``keep_alive`` says, once the reply is complete, whether the connection
    may carry another request.
    """

    def __init__(self, method: str) -> None:
        self._method = method
        self._buffer = bytearray()
        self._status: int | None = None
        self._headers: dict[str, str] = {}
        self._body = bytearray()
        self._length: int | None = None  # bytes of body still to come, when known
        self._chunked = False
        self._to_close = False  # a body that ends when the node closes the connection
        self._chunk_left = 0  # in a chunked body: bytes left of the current chunk
        self._in_trailer = False
        self.keep_alive = True
        self.started = False  # any byte of the reply arrived

    def feed(self, data: bytes) -> HttpReply | None:
        """Take ``data``; the reply once it is complete, else None."""
        if data:
            self.started = True
        self._buffer += data
        if self._status is None and not self._read_head():
            return None
        if self._chunked:
            return self._read_chunks()
        if self._to_close:
            self._body += self._buffer
            self._buffer.clear()
            return None
        assert self._length is not None
        take = min(self._length, len(self._buffer))
        self._body += self._buffer[:take]
        del self._buffer[:take]
        self._length -= take
        return self._reply() if self._length == 0 else None

    def end_of_stream(self) -> HttpReply:
        """The node closed the connection: the reply, if closing is how it ends."""
        if self._status is not None and self._to_close:
            self.keep_alive = False
            return self._reply()
        raise ReplyInvalid("the connection closed before the reply was complete")

    def _read_head(self) -> bool:
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD_BYTES:
                    raise ReplyInvalid("reply headers too long")
                return False
            head = bytes(self._buffer[:end]).decode("latin-1")
            del self._buffer[: end + 4]
            status_line, *header_lines = head.split("\r\n")
            status = _status_of(status_line)
            if 100 <= status < 200:
                continue  # an interim reply: the real one follows
            self._status = status
            for line in header_lines:
                name, sep, value = line.partition(":")
                if not sep:
                    raise ReplyInvalid(f"malformed header line {line!r}")
                self._headers[name.strip().lower()] = value.strip()
            self._frame_body(status_line)
            return True

    def _frame_body(self, status_line: str) -> None:
        assert self._status is not None
        connection = {
            token.strip() for token in self._headers.get("connection", "").lower().split(",")
        }
        if "close" in connection or status_line.startswith("HTTP/1.0"):
            self.keep_alive = False
        if self._method == "HEAD" or self._status in {204, 304}:
            self._length = 0
        elif "chunked" in self._headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in self._headers:
            try:
                self._length = int(self._headers["content-length"])
            except ValueError:
                raise ReplyInvalid("malformed Content-Length") from None
            if self._length < 0:
                raise ReplyInvalid("negative Content-Length")
        else:
            self._to_close = True
            self.keep_alive = False

    def _read_chunks(self) -> HttpReply | None:
        while True:
            if self._chunk_left > 0:
                take = min(self._chunk_left, len(self._buffer))
                self._body += self._buffer[:take]
                del self._buffer[:take]
                self._chunk_left -= take
                if self._chunk_left > 0:
                    return None
            end = self._buffer.find(b"\r\n")
            if end < 0:
                return None
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 2]
            if self._in_trailer:
                if not line:
                    return self._reply()
                continue
            if not line:
                continue  # the CRLF that ends a chunk's data
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise ReplyInvalid(f"malformed chunk size {line[:40]!r}") from None
            if size == 0:
                self._in_trailer = True
            else:
                self._chunk_left = size

    def _reply(self) -> HttpReply:
        assert self._status is not None
        text = self._body.decode("utf-8", errors="replace")
        try:
            data = fast_json.loads(text) if text else None
        except ValueError:
            data = None
        return HttpReply(status=self._status, data=data, text=text, headers=self._headers)


def _status_of(status_line: str) -> int:
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1."):
        raise ReplyInvalid(f"not an HTTP/1.x reply: {status_line[:60]!r}")
    try:
        return int(rest[:3])
    except ValueError:
        raise ReplyInvalid(f"malformed status line {status_line[:60]!r}") from None
