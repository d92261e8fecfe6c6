"""The HTTP/1.1 wire format taskq speaks to rqlite, checked as pure bytes.

``http_wire`` does no I/O: a request becomes bytes, and a reply's bytes are
fed to a :class:`ReplyReader` in whatever pieces the network delivers them.
These tests pin the request bytes exactly, and check that every way a reply
can be framed (length, chunks, until close) reads the same whether it arrives
in one piece, byte by byte, or split anywhere at all.
"""

from __future__ import annotations

import base64
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.broker.stores.http_plan import HttpCall, HttpReply
from taskq.broker.stores.http_transport import TransportOptions
from taskq.broker.stores.http_wire import Endpoint, ReplyInvalid, ReplyReader, encode_request

NODE = Endpoint("rqlite.local", 4001, tls=False)


def _request(call: HttpCall, authorization: str | None = None) -> tuple[list[str], bytes]:
    """The request's head lines (without the blank line) and its body."""
    raw = encode_request(call, NODE, authorization)
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, f"no end of head in {raw!r}"
    return head.decode("latin-1").split("\r\n"), body


def _header_names(lines: list[str]) -> list[str]:
    return [line.partition(":")[0].lower() for line in lines[1:]]


def _read_whole(raw: bytes, method: str = "GET") -> tuple[HttpReply, ReplyReader]:
    reader = ReplyReader(method)
    reply = reader.feed(raw)
    assert reply is not None, f"{raw!r} did not complete a reply"
    return reply, reader


def _read_in_pieces(pieces: list[bytes], method: str = "GET") -> tuple[HttpReply, ReplyReader]:
    """Feed ``pieces`` in order; only the last may complete the reply."""
    reader = ReplyReader(method)
    for piece in pieces[:-1]:
        assert reader.feed(piece) is None, f"complete before the end, at {piece!r}"
    reply = reader.feed(pieces[-1])
    assert reply is not None, "the last piece did not complete the reply"
    return reply, reader


def _bytewise(raw: bytes) -> list[bytes]:
    return [raw[i : i + 1] for i in range(len(raw))]


def _split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds) if b > a]


JSON_BODY = b'{"results": [{"rows_affected": 1}]}'
WITH_LENGTH = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: application/json\r\n"
    b"Content-Length: " + str(len(JSON_BODY)).encode() + b"\r\n"
    b"\r\n" + JSON_BODY
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"Content-Type: application/json\r\n"
    b"\r\n"
    b"5\r\n"
    b'{"res\r\n'
    b"b;name=value\r\n"  # a chunk extension, to be ignored
    b'ults": [{"r\r\n'
    b"15\r\n"
    b'ows_affected": 1}]}\r\n\r\n'  # 0x15 = 21 bytes: a CRLF inside the data, then the end
    b"0\r\n"
    b"X-Checksum: abc\r\n"  # a trailer, to be skipped
    b"X-Other: def\r\n"
    b"\r\n"
)
CONTINUE_THEN_REPLY = b"HTTP/1.1 100 Continue\r\n\r\n" + WITH_LENGTH
FRAMINGS = {"content-length": WITH_LENGTH, "chunked": CHUNKED, "after 100": CONTINUE_THEN_REPLY}
EXPECTED_DATA = {"results": [{"rows_affected": 1}]}


# -- the request


def test_a_post_with_a_json_body_declares_its_type_and_exact_length() -> None:
    body = {"statements": [["INSERT INTO t VALUES (?)", "é"]]}
    lines, sent = _request(HttpCall("POST", "http://rqlite.local:4001", "/db/execute", body=body))
    assert lines[0] == "POST /db/execute HTTP/1.1"
    assert "Content-Type: application/json" in lines
    assert f"Content-Length: {len(sent)}" in lines
    assert json.loads(sent) == body


def test_a_post_without_a_body_says_its_length_is_zero() -> None:
    lines, sent = _request(HttpCall("POST", "http://rqlite.local:4001", "/db/execute"))
    assert "Content-Length: 0" in lines
    assert "content-type" not in _header_names(lines)
    assert sent == b""


def test_a_get_carries_no_body_headers() -> None:
    lines, sent = _request(HttpCall("GET", "http://rqlite.local:4001", "/status"))
    assert lines[0] == "GET /status HTTP/1.1"
    assert "content-length" not in _header_names(lines)
    assert "content-type" not in _header_names(lines)
    assert sent == b""


def test_query_parameters_are_urlencoded_into_the_target() -> None:
    call = HttpCall(
        "GET", "http://rqlite.local:4001", "/db/query", params={"level": "strong", "q": "a b&c=d"}
    )
    lines, _ = _request(call)
    assert lines[0] == "GET /db/query?level=strong&q=a+b%26c%3Dd HTTP/1.1"


def test_a_call_without_parameters_has_no_question_mark_in_its_target() -> None:
    lines, _ = _request(HttpCall("GET", "http://rqlite.local:4001", "/readyz"))
    assert lines[0] == "GET /readyz HTTP/1.1"


def test_the_host_header_names_the_endpoint_with_its_port() -> None:
    lines, _ = _request(HttpCall("GET", "http://rqlite.local:4001", "/status"))
    assert lines[1] == "Host: rqlite.local:4001"


def test_the_host_header_brackets_an_ipv6_literal() -> None:
    raw = encode_request(
        HttpCall("GET", "http://[::1]:4001", "/status"), Endpoint.of("http://[::1]:4001"), None
    )
    assert b"\r\nHost: [::1]:4001\r\n" in raw


def test_an_authorization_line_is_sent_only_when_given() -> None:
    call = HttpCall("GET", "http://rqlite.local:4001", "/status")
    with_auth, _ = _request(call, authorization="Basic dXNlcjpwdw==")
    without_auth, _ = _request(call)
    assert "Authorization: Basic dXNlcjpwdw==" in with_auth
    assert "authorization" not in _header_names(without_auth)


def test_every_head_line_ends_in_crlf_and_the_head_in_a_blank_line() -> None:
    raw = encode_request(HttpCall("GET", "http://rqlite.local:4001", "/status"), NODE, None)
    assert raw.endswith(b"\r\n\r\n")
    assert b"\n" not in raw.replace(b"\r\n", b"")


# -- reading a reply


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_reply_fed_in_one_piece_is_read_whole(framing: str) -> None:
    reply, reader = _read_whole(FRAMINGS[framing])
    assert reply.status == 200
    assert reply.data == EXPECTED_DATA
    assert reader.keep_alive


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_reply_fed_one_byte_at_a_time_completes_only_on_its_last_byte(framing: str) -> None:
    reply, reader = _read_in_pieces(_bytewise(FRAMINGS[framing]))
    assert reply.status == 200
    assert reply.data == EXPECTED_DATA
    assert reader.keep_alive


@given(framing=st.sampled_from(sorted(FRAMINGS)), data=st.data())
def test_a_reply_split_anywhere_reads_the_same_as_whole(framing: str, data: st.DataObject) -> None:
    raw = FRAMINGS[framing]
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=len(raw) - 1), max_size=12))
    pieces = _split_at(raw, cuts)
    assert b"".join(pieces) == raw
    reply, _ = _read_in_pieces(pieces)
    whole, _ = _read_whole(raw)
    assert reply == whole


def test_a_chunked_body_is_joined_without_its_extensions_or_trailers() -> None:
    reply, _ = _read_whole(CHUNKED)
    assert reply.text == '{"results": [{"rows_affected": 1}]}\r\n'
    assert "x-checksum" not in reply.headers


def test_a_chunked_body_wins_over_a_content_length() -> None:
    reply, _ = _read_whole(
        b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n"
    )
    assert reply.data == {}


def test_a_chunk_size_may_be_upper_case_hex() -> None:
    reply, _ = _read_whole(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"
    )
    assert reply.text == "0123456789"


def test_a_status_line_without_a_reason_phrase_is_read() -> None:
    reply, _ = _read_whole(b"HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n")
    assert reply.status == 503


def test_an_interim_100_continue_is_skipped_for_the_real_reply() -> None:
    reply, _ = _read_whole(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert reply.status == 201
    assert reply.data == {}


def test_an_interim_reply_alone_is_not_a_reply() -> None:
    reader = ReplyReader("POST")
    assert reader.feed(b"HTTP/1.1 100 Continue\r\n\r\n") is None
    assert reader.started


def test_a_204_is_complete_at_the_end_of_its_head() -> None:
    reply, reader = _read_whole(b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n")
    assert reply.status == 204
    assert reply.text == ""
    assert reply.data is None
    assert reader.keep_alive


def test_a_reply_to_head_has_no_body_whatever_its_length_says() -> None:
    reply, _ = _read_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", method="HEAD")
    assert reply.status == 200
    assert reply.text == ""


def test_connection_close_means_the_connection_cannot_be_kept() -> None:
    _, reader = _read_whole(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
    assert reader.keep_alive is False


def test_connection_close_is_recognised_in_any_letter_case() -> None:
    _, reader = _read_whole(b"HTTP/1.1 200 OK\r\nCONNECTION: Close\r\nContent-Length: 0\r\n\r\n")
    assert reader.keep_alive is False


def test_an_http_1_0_reply_cannot_keep_the_connection() -> None:
    _, reader = _read_whole(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert reader.keep_alive is False


def test_a_body_without_a_length_is_complete_when_the_node_closes() -> None:
    reader = ReplyReader("GET")
    assert reader.feed(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[1, ") is None
    assert reader.feed(b"2]") is None
    reply = reader.end_of_stream()
    assert reply.data == [1, 2]
    assert reader.keep_alive is False


def test_a_connection_closed_mid_body_is_an_invalid_reply() -> None:
    reader = ReplyReader("GET")
    assert reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345") is None
    with pytest.raises(ReplyInvalid):
        reader.end_of_stream()


def test_a_connection_closed_mid_chunk_is_an_invalid_reply() -> None:
    reader = ReplyReader("GET")
    assert reader.feed(CHUNKED[: CHUNKED.index(b"15\r\n") + 6]) is None
    with pytest.raises(ReplyInvalid):
        reader.end_of_stream()


def test_a_connection_closed_before_any_byte_is_an_invalid_reply_never_started() -> None:
    reader = ReplyReader("GET")
    assert reader.started is False
    with pytest.raises(ReplyInvalid):
        reader.end_of_stream()
    assert reader.started is False


def test_a_connection_closed_mid_head_is_an_invalid_reply_that_started() -> None:
    reader = ReplyReader("GET")
    assert reader.feed(b"HTTP/1.1 200 OK\r\nContent-Le") is None
    assert reader.started
    with pytest.raises(ReplyInvalid):
        reader.end_of_stream()


@pytest.mark.parametrize(
    "status_line",
    [b"SSH-2.0-OpenSSH_9.6", b"garbage", b"HTTP/2 200", b"HTTP/1.1 OK 200", b""],
)
def test_a_status_line_that_is_not_http_1_is_an_invalid_reply(status_line: bytes) -> None:
    with pytest.raises(ReplyInvalid):
        ReplyReader("GET").feed(status_line + b"\r\nContent-Length: 0\r\n\r\n")


def test_a_header_line_without_a_colon_is_an_invalid_reply() -> None:
    with pytest.raises(ReplyInvalid):
        ReplyReader("GET").feed(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n")


@pytest.mark.parametrize("length", [b"ten", b"-1"])
def test_a_malformed_content_length_is_an_invalid_reply(length: bytes) -> None:
    with pytest.raises(ReplyInvalid):
        ReplyReader("GET").feed(b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\n")


def test_a_malformed_chunk_size_is_an_invalid_reply() -> None:
    with pytest.raises(ReplyInvalid):
        ReplyReader("GET").feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")


def test_an_endless_head_is_an_invalid_reply() -> None:
    reader = ReplyReader("GET")
    with pytest.raises(ReplyInvalid):
        reader.feed(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (64 * 1024 + 1))


def test_a_json_body_is_parsed_into_data() -> None:
    reply, _ = _read_whole(b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"ok": [1.5]}')
    assert reply.data == {"ok": [1.5]}
    assert reply.text == '{"ok": [1.5]}'


def test_a_body_that_is_not_json_leaves_data_none_and_keeps_the_text() -> None:
    reply, _ = _read_whole(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 9\r\n\r\nnot ready"
    )
    assert reply.status == 503
    assert reply.data is None
    assert reply.text == "not ready"


def test_a_body_in_utf8_is_decoded_as_text() -> None:
    body = '{"name": "café"}'.encode()
    reply, _ = _read_whole(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    assert reply.data == {"name": "café"}


def test_header_names_are_lower_cased_and_values_stripped() -> None:
    reply, _ = _read_whole(
        b"HTTP/1.1 200 OK\r\nX-RQLITE-Version:   v8.36.0  \r\nContent-Length: 0\r\n\r\n"
    )
    assert reply.headers["x-rqlite-version"] == "v8.36.0"
    assert "X-RQLITE-Version" not in reply.headers


def test_a_reader_has_not_started_until_a_byte_arrives() -> None:
    reader = ReplyReader("GET")
    reader.feed(b"")
    assert reader.started is False
    reader.feed(b"H")
    assert reader.started is True


# -- where a base URL points


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://node1", Endpoint("node1", 80, tls=False)),
        ("https://node1", Endpoint("node1", 443, tls=True)),
        ("http://node1:4001", Endpoint("node1", 4001, tls=False)),
        ("https://node1:4443/", Endpoint("node1", 4443, tls=True)),
        ("http://[::1]:4001", Endpoint("::1", 4001, tls=False)),
        ("https://[fe80::1]", Endpoint("fe80::1", 443, tls=True)),
        ("HTTP://Node1:4001", Endpoint("node1", 4001, tls=False)),
    ],
)
def test_an_endpoint_is_read_from_a_base_url(base_url: str, expected: Endpoint) -> None:
    assert Endpoint.of(base_url) == expected


def test_an_ipv6_endpoint_brackets_its_host_in_the_authority() -> None:
    assert Endpoint.of("http://[::1]:4001").authority == "[::1]:4001"
    assert Endpoint.of("http://node1").authority == "node1:80"


@pytest.mark.parametrize("base_url", ["ftp://node1", "node1:4001", "http://", "http:///path"])
def test_a_base_url_that_is_not_http_is_refused(base_url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        Endpoint.of(base_url)


# -- credentials


def test_a_username_and_password_make_a_basic_authorization() -> None:
    options = TransportOptions(timeout=1.0, connect_timeout=1.0, username="ann", password="s3:cr")
    authorization = options.authorization()
    assert authorization is not None
    scheme, _, token = authorization.partition(" ")
    assert scheme == "Basic"
    assert base64.b64decode(token) == b"ann:s3:cr"


def test_a_username_without_password_authorizes_with_an_empty_password() -> None:
    options = TransportOptions(timeout=1.0, connect_timeout=1.0, username="ann")
    assert options.authorization() == "Basic " + base64.b64encode(b"ann:").decode()


def test_no_username_means_no_authorization() -> None:
    options = TransportOptions(timeout=1.0, connect_timeout=1.0, password="ignored")
    assert options.authorization() is None
