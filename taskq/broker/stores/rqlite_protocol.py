"""rqlite's HTTP protocol as plain functions: request bodies in, typed outcomes out.

rqlite reports trouble on three channels, and each is read here:

* the HTTP status (401 for credentials it refuses, and rqlite 10 answers
  401 as well to a user whose credentials are good but lack the permission:
  the store tells the two apart by asking for something else; 403 from a
  proxy in front of it; 503 when the node knows no leader; 5xx for failures
  inside the node);
* a top-level ``"error"`` in the JSON body, which concerns the whole request
  (for instance leadership lost while committing: the write may or may not
  have been applied);
* an ``"error"`` in one statement's result (syntax, constraint), after which
  a transactional request is rolled back whole.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskq import errors
from taskq.broker.stores.http_plan import HttpReply, SendFailure, SendStage
from taskq.broker.stores.store import NodeInfo, Row, Statement, StatementResult

# Top-level errors after which nothing was applied, as rqlite 10.2 words them:
# a follower that could not reach the leader to forward (it failed to dial),
# or a node that was not, or no longer, the leader before it proposed the
# write. "leadership lost while committing log", a connection reset after
# forwarding, or a deadline are absent on purpose: those writes may have been
# applied (rqlite applied them in most observed cases).
_NOT_APPLIED_PHRASES = (
    "leader not found",
    "not leader",
    "not the leader",
    "leadership transfer in progress",
    "dial tcp",
)
_CONSTRAINT_PHRASES = ("constraint failed", "unique constraint", "not null constraint")


class AnswerKind(enum.Enum):
    """What an rqlite answer means for the request: done, safe to resend, or not."""

    OK = "ok"  # parsed; done
    RETRY_SAFE = "retry_safe"  # nothing was applied: another node or a later try is safe
    UNKNOWN = "unknown"  # maybe applied: resend only what is idempotent
    FAIL = "fail"  # a definite error: raise it
    REFUSED = "refused"  # credentials or permissions refused, nothing applied: see refusal_error


@dataclass(frozen=True, slots=True)
class RqliteAnswer:
    """One answer of a node, read on all three channels (see :func:`read_answer`)."""

    kind: AnswerKind
    results: list[StatementResult] | None = None
    error: errors.StoreError | None = None
    leader_hint: str | None = None
    message: str = ""
    # The node answered, and it knows no leader: its own copy could still be read.
    no_leader: bool = False
    status: int = 0
    # The node refused the connection: nothing listens at its address.
    refused: bool = False


def statements_body(statements: Sequence[Statement]) -> list[list[Any]]:
    """The JSON body rqlite expects: ``[[sql, {named params}], ...]``, each SQL compacted."""
    return [
        [compact_sql(statement.sql), dict(statement.params)]
        if statement.params
        else [compact_sql(statement.sql)]
        for statement in statements
    ]


# What compact_sql keeps whole (a string literal, or a quoted identifier in any of
# SQLite's three quotes), else a run of spaces and comments.
_SQL_SPACE = re.compile(
    r"""('(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])|(?:\s|--[^\n]*|/\*.*?\*/)+""",
    re.DOTALL,
)


@functools.lru_cache(maxsize=1024)
def compact_sql(sql: str) -> str:
    """``sql`` with each run of white space and comments outside quotes made one space.

    The statements are written indented over many lines, and every byte of
    a write is read, logged and replicated by each node, at about 0.2 us of
    the nodes' CPU a byte (measured with padded statements): a single
    submit's three statements lose 160 of their 1,700 bytes. No token is
    joined to another (a space stays between them), so the statement means
    the same, and rqlite still finds what it looks for in the text
    (``returning `` and the time functions' calls).
    """
    return _SQL_SPACE.sub(lambda piece: piece.group(1) or " ", sql).strip()


def read_answer(feedback: HttpReply | SendFailure, *, sql: Sequence[str] = ()) -> RqliteAnswer:
    """Read all three error channels of one answer and decide what it means."""
    if isinstance(feedback, SendFailure):
        kind = AnswerKind.RETRY_SAFE if feedback.stage is SendStage.NOT_SENT else AnswerKind.UNKNOWN
        return RqliteAnswer(kind, message=feedback.message, refused=feedback.refused)
    reply = feedback
    if reply.status in (401, 403):
        return RqliteAnswer(AnswerKind.REFUSED, message=reply.text.strip(), status=reply.status)
    if reply.status in (301, 302, 307, 308):
        return RqliteAnswer(
            AnswerKind.RETRY_SAFE,
            leader_hint=_base_of(reply.headers.get("location", "")),
            message=f"redirected to {reply.headers.get('location', '?')}",
        )
    body_error = _top_level_error(reply)
    if reply.status == 503 or (body_error and _names_no_leader(body_error)):
        return RqliteAnswer(
            AnswerKind.RETRY_SAFE,
            message=body_error or f"HTTP 503: {reply.text.strip()}",
            no_leader=True,
        )
    if reply.status >= 400 or body_error:
        return RqliteAnswer(
            AnswerKind.UNKNOWN, message=body_error or f"HTTP {reply.status}: {reply.text.strip()}"
        )
    results = reply.data.get("results") if isinstance(reply.data, dict) else None
    if not isinstance(results, list):
        return RqliteAnswer(AnswerKind.UNKNOWN, message=f"unexpected answer: {reply.text[:200]!r}")
    for index, result in enumerate(results):
        if isinstance(result, dict) and result.get("error"):
            text = sql[index] if index < len(sql) else ""
            return RqliteAnswer(
                AnswerKind.FAIL, error=statement_error(str(result["error"]), index, text)
            )
    return RqliteAnswer(AnswerKind.OK, results=[parse_result(result) for result in results])


def refusal_error(
    node: str, outcome: RqliteAnswer, *, username: str | None, permission: str, accepted: bool
) -> errors.StoreError:
    """The error for a request ``node`` refused (see :attr:`AnswerKind.REFUSED`).

    ``permission`` is rqlite's name for what the request needed (``execute``,
    ``query``, ``status``); ``accepted`` says whether the same credentials
    passed another request, which makes a 401 a missing permission.
    """
    detail = f": {outcome.message}" if outcome.message else ""
    answer = f"HTTP {outcome.status}{detail}"
    if outcome.status == 403 or (username is not None and accepted):
        who = f"user {username!r}" if username is not None else "anonymous requests"
        return errors.StorePermissionDenied(
            f"rqlite at {node} does not grant {who} the {permission!r} permission ({answer})"
        )
    if username is None:
        return errors.StoreAuthError(
            f"rqlite at {node} asks for credentials ({answer}) and the store URL has none; "
            "use rqlite://user:password@host:port"
        )
    return errors.StoreAuthError(
        f"rqlite at {node} refused the password of user {username!r} ({answer})"
    )


def statement_error(message: str, index: int, sql: str) -> errors.StatementError:
    if any(phrase in message.lower() for phrase in _CONSTRAINT_PHRASES):
        return errors.ConstraintViolation(message, index=index, sql=sql)
    return errors.StatementError(message, index=index, sql=sql)


def parse_result(result: Any) -> StatementResult:
    """One entry of ``results`` (associative form) as a :class:`StatementResult`."""
    if not isinstance(result, dict):
        return StatementResult()
    rows: list[Row] = []
    if "rows" in result:
        rows = [dict(row) for row in result["rows"] or []]
    elif "values" in result:
        columns = result.get("columns") or []
        rows = [dict(zip(columns, values, strict=False)) for values in result["values"] or []]
    last_insert_id = result.get("last_insert_id")
    return StatementResult(
        rows=rows,
        rows_affected=int(result.get("rows_affected") or 0),
        last_insert_id=int(last_insert_id) if last_insert_id is not None else None,
    )


def parse_nodes(data: Any, *, tls: bool) -> list[NodeInfo]:
    """The answer of ``/nodes?ver=2`` as :class:`NodeInfo` records."""
    raw = data.get("nodes") if isinstance(data, dict) else data
    if isinstance(raw, dict):  # older form: a map keyed by node id
        raw = [dict(value, id=key) for key, value in raw.items()]
    nodes: list[NodeInfo] = []
    for item in raw or []:
        nodes.append(
            NodeInfo(
                id=str(item.get("id", "")),
                address=api_base(str(item.get("api_addr", "")), tls=tls),
                reachable=bool(item.get("reachable", False)),
                leader=bool(item.get("leader", False)),
                voter=bool(item.get("voter", True)),
                error=str(item.get("error", "")),
                raft_address=str(item.get("addr", "")),
            )
        )
    return nodes


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """What a node's ``/status`` says of itself."""

    node_id: str = ""
    raft_state: str = ""
    version: str = ""


def parse_status(data: Any) -> NodeStatus:
    """The node id, raft state and version from a node's ``/status``."""
    if not isinstance(data, dict):
        return NodeStatus()
    store = data.get("store") or {}
    raft = store.get("raft") or {}
    build = data.get("build") or {}
    return NodeStatus(
        node_id=str(store.get("node_id", "")),
        raft_state=str(raft.get("state", "")),
        version=str(build.get("version", "")),
    )


def api_base(api_addr: str, *, tls: bool) -> str:
    """A node's advertised API address as a base URL."""
    if not api_addr:
        return ""
    if "://" in api_addr:
        return api_addr.rstrip("/")
    return f"{'https' if tls else 'http'}://{api_addr}"


def _base_of(url: str) -> str | None:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    return f"{scheme}://{rest.split('/', 1)[0]}"


def _top_level_error(reply: HttpReply) -> str:
    if isinstance(reply.data, dict) and reply.data.get("error"):
        return str(reply.data["error"])
    if reply.status >= 400 and reply.data is None:
        return reply.text.strip()
    return ""


def _names_no_leader(message: str) -> bool:
    lowered = message.lower()
    return any(phrase in lowered for phrase in _NOT_APPLIED_PHRASES)
