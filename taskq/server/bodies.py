"""What requests carry: JSON bodies as msgspec Structs, and query parameters, checked once.

A body with an unknown member, or a member of the wrong type, is refused
with the member's name (422) before anything is written, an unknown member
with the known one it most likely meant; a body that is not JSON at all is
a 400. The checks of a job's values themselves are the
broker's (:func:`taskq.broker.client.client.validate_spec`), as for every client.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, NamedTuple

import msgspec
import msgspec.inspect
from starlette.requests import Request

from taskq import errors
from taskq.bounds import Text
from taskq.broker import job_validation, schedule_timing
from taskq.broker.client.job_request import JobRequest
from taskq.broker.schedule_timing import CatchUp

MAX_PAGE = 1000
DEFAULT_PAGE = 50
# The largest id a store holds (SQLite's INTEGER): a larger one names nothing.
MAX_ID = 2**63 - 1
WHOLE_ID = Text(pattern="^[0-9]+$")
"""An id as a path writes it (``/jobs/{job_id}``, ``/workflows/{workflow_id}``): digits."""
# A batch of a thousand jobs of 64 KiB each; one job may carry 1 MiB.
MAX_BODY_BYTES = 64 * 1024 * 1024


def members(body: bytes) -> list[set[str]]:
    """The members each job of a body names (a body already decoded as jobs is JSON)."""
    sent = msgspec.json.decode(body)
    return [set(job) for job in (sent if isinstance(sent, list) else [sent])]


class QueuePatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A queue's settings to change; a member left out stays as it is, null lifts a limit."""

    paused: bool | msgspec.UnsetType = msgspec.UNSET
    max_running: Annotated[int, job_validation.MAX_RUNNING.schema()] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    rate_limit: Annotated[float, job_validation.RATE_LIMIT.schema()] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    rate_period: Annotated[float, job_validation.RATE_PERIOD.schema()] = 1.0
    # Pausing, or limiting, a queue without jobs or settings is refused (a
    # misspelt name), unless it is created on purpose.
    create: bool = False


class SubmitLimitRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """At most ``rate`` submissions each ``period`` seconds, for the submitter of the path."""

    rate: Annotated[float, job_validation.SUBMIT_RATE.schema()]
    period: Annotated[float, job_validation.SUBMIT_PERIOD.schema()]


class SchedulePatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Pause a schedule (none of its ticks fires) or resume it."""

    paused: bool


class PruneRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Delete the jobs that finished more than ``older_than`` seconds ago, with their
    attempts; without it, those past the store's retention (``/store/retention``)."""

    older_than: Annotated[float, msgspec.Meta(gt=0)] | None = None


class RetentionPatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How long finished jobs are kept: seconds after they end, null to keep them until
    pruned by hand; a member left out stays as it is."""

    succeeded_seconds: Annotated[float, msgspec.Meta(gt=0)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    failed_seconds: Annotated[float, msgspec.Meta(gt=0)] | msgspec.UnsetType | None = msgspec.UNSET


class ScheduleRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A periodic job: ``job`` submitted on every tick of ``cron`` or ``every_seconds``."""

    name: Annotated[str, schedule_timing.NAME.schema()]
    job: JobRequest
    cron: str | None = None
    every_seconds: Annotated[float, schedule_timing.INTERVAL.schema()] | None = None
    timezone: Annotated[
        str, msgspec.Meta(description="The IANA zone `cron` is read in; UTC when none is given.")
    ] = "UTC"
    catch_up: CatchUp = CatchUp.ONCE
    replace: bool = False


async def read_body(request: Request) -> bytes:
    """The request's body, refused (413) past :data:`MAX_BODY_BYTES` before it is all read."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise errors.TooLarge(
                f"the body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB; send fewer jobs"
            )
        chunks.append(chunk)
    return b"".join(chunks)


class Shape(NamedTuple):
    """What a body is, said to a sender whose body is something else (an array sent for an
    object, an object without its one required member), and the member to name."""

    what: str
    field: str | None = None


def decoded(
    body: bytes,
    into: Any,
    *,
    refused: type[errors.InvalidJob] | type[errors.InvalidSetting] = errors.InvalidJob,
    shape: Shape | None = None,
) -> Any:
    """``body`` as ``into``: :class:`taskq.errors.BadRequest` if not JSON, else a bad member named.

    A member of a job (a batch's, a workflow's, a schedule's) is refused as
    :class:`taskq.errors.InvalidJob`; any other member as ``refused``. A body
    refused whole, not a member of it, is refused saying ``shape`` (else the
    JSON kind expected) and what came. Every refusal is in the API's words, a
    job named by its position (``job 0: unknown field depends_on; did you mean
    parents?``, ``job 1: target is required``), never msgspec's with its JSON
    path: a client in another language reads these, not Python's.
    """
    if not body.strip():
        raise errors.BadRequest(f"the body is empty; {_wanted(into)} is expected")
    try:
        return msgspec.json.decode(body, type=into)
    except msgspec.ValidationError as exc:
        refusal = str(exc)
    except msgspec.DecodeError as exc:
        # Whatever the Content-Type says (curl -d sends a form's), the body is read as JSON:
        # a form, name=value&..., is the likely mistake, and sending JSON is the way out.
        raise errors.BadRequest(
            f"the body is not JSON ({exc}); send {_wanted(into)}, whatever the Content-Type"
        ) from None
    # JSON has one kind of number, and JSON Schema (so the OpenAPI document) reads
    # 3.0 as the integer 3; msgspec takes no float into an int member. Rare, so
    # only a refused body is read again, each such member made whole where msgspec
    # points at one.
    tree = msgspec.json.decode(body)
    while _made_whole(tree, refusal):
        try:
            return msgspec.convert(tree, into)
        except msgspec.ValidationError as exc:
            refusal = str(exc)
    path = _member_path(refusal)
    kind = errors.InvalidJob if path.startswith(_IN_A_JOB) else refused
    got = _got(refusal, tree, into)
    if got is not None and (shape is not None or refusal.startswith("Expected `")):
        what = shape.what if shape is not None else f"the body must be {_wanted(into)}"
        raise kind(f"{what}; got {got}", field=shape.field if shape else None) from None
    message = _unknown_member(refusal, into) or _missing(refusal) or _readable(refusal, tree)
    raise kind(message, field=_member(refusal)) from None


# msgspec's refusal of an object without a member it must have, with where the object is
# (none for the body's own): "Object missing required field `target` - at `$.jobs[0]`".
_MISSING_AT = re.compile(r"Object missing required field `([^`]+)`(?: - at `\$([^`]*)`)?")


def _missing(refusal: str) -> str | None:
    """msgspec's refusal of a missing member in words (``job 1: target is required``), or
    None for another refusal."""
    match = _MISSING_AT.fullmatch(refusal)
    if match is None:
        return None
    where, member = _where(f"{match[2] or ''}.{match[1]}")
    return f"{where}{member} is required"


# msgspec refusing a body, not a member of it, for lacking a member it must have.
_MISSING = re.compile(r"Object missing required field `(\w+)`")


def _got(refusal: str, tree: Any, into: Any) -> str | None:
    """What came, in words (``an array``, ``an object without jobs``), where msgspec's
    ``refusal`` is of the whole body: of its kind, or of a member it must have. None where
    it is of a value (named with its path)."""
    if _AT.search(refusal) is not None:
        return None
    if refusal.startswith("Expected `"):
        return _kind_of(tree)
    missing = _MISSING.fullmatch(refusal)
    if missing is not None and missing[1] in getattr(into, "__struct_fields__", ()):
        return f"an object without {missing[1]}"
    return None


def _kind_of(value: Any) -> str:
    """A JSON value's kind in words: ``an array``, ``a string``."""
    if isinstance(value, bool):  # before int, which it is in Python
        return "true or false"
    kinds = {dict: "an object", list: "an array", str: "a string", int: "a number"}
    return kinds.get(type(value), "a number" if isinstance(value, float) else "null")


def _wanted(into: Any) -> str:
    """What a body decoded as ``into`` is: a JSON object, or (a batch too) an array."""
    batch = any(typing.get_origin(_bare(one)) is list for one in typing.get_args(into))
    return "a JSON object or array" if batch else "a JSON object"


def _bare(kind: Any) -> Any:
    """``kind`` without the bounds ``Annotated`` gives it (``list[JobRequest]``)."""
    return typing.get_args(kind)[0] if typing.get_origin(kind) is Annotated else kind


# msgspec refusing a float for an int: "Expected `int | null`, got `float` - at `$.a[0].b`".
_FLOAT_FOR_INT = re.compile(r"Expected `int[^`]*`, got `float` - at `\$([^`]*)`")
_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")


def _made_whole(tree: Any, refusal: str) -> bool:
    """Whether the float ``refusal`` names in ``tree`` was whole, and is now an int."""
    match = _FLOAT_FOR_INT.fullmatch(refusal)
    if match is None:
        return False
    *steps, last = _steps(match[1])
    parent = tree
    for step in steps:
        parent = parent[step]
    number = parent[last]
    if not (isinstance(number, float) and number.is_integer()):
        return False
    parent[last] = int(number)
    return True


def _steps(path: str) -> list[str | int]:
    """``.jobs[0].timeout`` as ``["jobs", 0, "timeout"]``."""
    return [name or int(index) for name, index in _STEP.findall(path)]


# The innermost member of the path: `$.priority`, `$[3].queue`, `$.job.queue`, `$.jobs[0].args`.
_PATH = re.compile(r"`\$[^`]*?\.([A-Za-z_]+)(?:\[\d+\])*`")


def _member(message: str) -> str | None:
    """The member a msgspec message names: the one unknown or missing, else the innermost
    of its path (``... - at `$.jobs[0].priority``` → ``priority``), not the object that
    holds it (``jobs``)."""
    named = _FIELD.search(message) or _PATH.search(message)
    return named[1] if named else None


# Where a msgspec message says the refusal is, and the member it names besides.
_AT = re.compile(r" - at `\$([^`]*)`$")
_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")
# The paths into a job of a batch, of a workflow, of a schedule.
_IN_A_JOB = ("[", ".jobs[", ".job.")


def _member_path(message: str) -> str:
    """The path of the member a msgspec message refuses (``.jobs[0].timeout``), from the body."""
    at = _AT.search(message)
    field = _FIELD.search(message)
    return (at[1] if at else "") + (f".{field[1]}" if field else "")


# msgspec's refusal of a value: "Expected `float | null`, got `str` - at `$.timeout`", or of
# one out of its bounds: "Expected `float` > 0.0 - at `$.older_than`".
_EXPECTED = re.compile(r"Expected `([^`]+)`(?:, got `[^`]+`| (.+))? - at `\$([^`]*)`")
_KINDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
}
# The longest value a refusal shows.
_SHOWN_CHARS = 60


def _readable(refusal: str, tree: Any) -> str:
    """msgspec's refusal of a value in words, naming the member and the value sent.

    ``timeout must be a number or null, got "5x"``; in a batch or a workflow
    the job is named by its position (``job 1: timeout ...``). Other
    refusals are msgspec's own words.
    """
    match = _EXPECTED.fullmatch(refusal)
    if match is None:
        return refusal
    expected, bound, path = match[1], match[2], match[3]
    kinds = " or ".join(_KINDS.get(kind, f"`{kind}`") for kind in expected.split(" | "))
    wanted = f"{kinds} {bound}" if bound else kinds
    where, member = _where(path)
    try:
        value = tree
        for step in _steps(path):
            value = value[step]
    except (KeyError, IndexError, TypeError):
        return f"{where}{member} must be {wanted}"
    shown = msgspec.json.encode(value).decode()
    if len(shown) > _SHOWN_CHARS:
        shown = shown[: _SHOWN_CHARS - 3] + "..."
    return f"{where}{member} must be {wanted}, got {shown}"


def _where(path: str) -> tuple[str, str]:
    """A member's ``path`` as a refusal says it: the job by its position in a batch or a
    workflow (``job 1: ``, else nothing), and the member's path in it (``timeout``,
    ``job.queue``)."""
    job = re.match(r"(?:\.jobs)?\[(\d+)\]\.", path)
    return (f"job {job[1]}: " if job else ""), path[job.end() if job else 0 :].removeprefix(".")


# msgspec's refusal of a member the object does not take, with where the object is (none
# for the body's own): "Object contains unknown field `depends_on` - at `$.jobs[0]`".
_UNKNOWN = re.compile(r"Object contains unknown field `([^`]+)`(?: - at `\$([^`]*)`)?")
# What other queues call the jobs a job waits on (RQ's depends_on, a DAG's parents): said
# as the member that names them here, a workflow's job's parents or a job's after.
_WAITS_ON = frozenset({"depends_on", "dependencies", "parents"})
_WAITS_ON_HERE = ("parents", "after")


def _unknown_member(refusal: str, into: Any) -> str | None:
    """msgspec's refusal of an unknown member in the API's words with what it adds (the
    known member it most likely stands for; a submitter's source; else the known members),
    or None for another refusal. See :func:`decoded`."""
    match = _UNKNOWN.fullmatch(refusal)
    if match is None:
        return None
    name, at = match[1], match[2] or ""
    where, member = _where(f"{at}.{name}")
    inside = member.removesuffix(name)  # the object's own path: "job." in a schedule
    steps = _steps(at)
    known = [field.encode_name for kind in _objects(into, steps) for field in kind.fields]
    meant = [each for each in _WAITS_ON_HERE if each in known] if name in _WAITS_ON else []
    meant = meant or difflib.get_close_matches(name, known, n=1)
    if name == "submitter" and _submits(into, steps):
        added = _SUBMITTER
    elif meant:
        added = f"did you mean {inside}{meant[0]}?"
    else:
        added = f"known: {', '.join(sorted(known))}" if known else ""
    return f"{where}unknown field {member}" + (f"; {added}" if added else "")


# A job's submitter is the token's name, never a member of the request.
_SUBMITTER = "the submitter is the name of the request's token and cannot be sent"


def _submits(into: Any, steps: Sequence[str | int]) -> bool:
    """Whether the object at ``steps`` is a job, or holds the jobs it submits (a workflow's,
    a schedule's): one whose submitter is the request's token's name."""
    held = [*steps], [*steps, "job"], [*steps, "jobs", 0]
    return any(issubclass(kind.cls, JobRequest) for at in held for kind in _objects(into, at))


def _objects(into: Any, steps: Sequence[str | int]) -> list[msgspec.inspect.StructType]:
    """The kinds of object a body decoded as ``into`` may have at ``steps`` (``["jobs", 0]``),
    none where it has no object."""
    kinds = _alternatives(msgspec.inspect.type_info(into))
    for step in steps:
        inner: list[msgspec.inspect.Type] = []
        for kind in kinds:
            if isinstance(step, int) and isinstance(kind, msgspec.inspect.ListType):
                inner.append(kind.item_type)
            elif isinstance(step, str) and isinstance(kind, msgspec.inspect.StructType):
                inner += [field.type for field in kind.fields if field.encode_name == step]
        kinds = [each for kind in inner for each in _alternatives(kind)]
    return [kind for kind in kinds if isinstance(kind, msgspec.inspect.StructType)]


def _alternatives(kind: msgspec.inspect.Type) -> list[msgspec.inspect.Type]:
    """``kind`` without its bounds (``Annotated``), a union as its members."""
    if isinstance(kind, msgspec.inspect.Metadata):
        return _alternatives(kind.type)
    if isinstance(kind, msgspec.inspect.UnionType):
        return [each for member in kind.types for each in _alternatives(member)]
    return [kind]


def integer(params: Mapping[str, str], name: str, *, low: int = 0, high: int = MAX_ID) -> int:
    """A whole-number query parameter within bounds, or :class:`taskq.errors.BadRequest`;
    never past what the store holds (an offset past it would fail there, a 500)."""
    text = params[name]
    try:
        value = int(text)
    except ValueError:
        raise errors.BadRequest(
            f"query parameter {name} must be a whole number, got {text!r}"
        ) from None
    if not low <= value <= high:
        raise errors.BadRequest(
            f"query parameter {name} must be >= {low} and <= {high}, got {value}"
        )
    return value


def number(params: Mapping[str, str], name: str, *, default: float, high: float) -> float:
    """A number of seconds in [0, high] from the query, or :class:`taskq.errors.BadRequest`."""
    text = params.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise errors.BadRequest(f"query parameter {name} must be a number, got {text!r}") from None
    if not 0 <= value <= high:
        raise errors.BadRequest(
            f"query parameter {name} must be between 0 and {high:g}, got {text}"
        )
    return value


def choice(params: Mapping[str, str], name: str, choices: Iterable[str]) -> str | None:
    """A query parameter that takes one of ``choices`` (None: not given, or empty), or
    :class:`taskq.errors.BadRequest` naming them: a bad one is the query's fault, as a bad
    ``limit`` is, not a refused job's."""
    text = params.get(name)
    if not text:
        return None
    named = list(choices)
    if text not in named:
        raise errors.BadRequest(
            f"query parameter {name} must be one of {', '.join(named)}, got {text!r}"
        )
    return text


def keyset(params: Mapping[str, str]) -> tuple[int, int | None]:
    """A page's ``limit`` (1 to 1000, 50 by default) and ``before`` (the last id seen, if any)."""
    limit = integer(params, "limit", low=1, high=MAX_PAGE) if "limit" in params else DEFAULT_PAGE
    before = integer(params, "before", low=1, high=MAX_ID) if "before" in params else None
    return limit, before


def only_known(params: Mapping[str, str], known: set[str]) -> None:
    """Refuse a query parameter this endpoint does not take (a typo would filter nothing)."""
    unknown = sorted(set(params) - known)
    if unknown:
        meant = [close for name in unknown for close in difflib.get_close_matches(name, known, 1)]
        hint = f" (did you mean {' or '.join(meant)}?)" if meant else ""
        takes = f"known: {', '.join(sorted(known))}" if known else "this route takes none"
        raise errors.BadRequest(f"unknown query parameter(s) {', '.join(unknown)}{hint}; {takes}")


def id_in_path(request: Request, name: str, noun: str, not_found: type[errors.TaskqError]) -> int:
    """The id the path's ``name`` parameter gives: BadRequest for text that is not a whole
    number (:data:`WHOLE_ID`), as for a bad query parameter; ``not_found`` for a whole
    number no ``noun`` can have."""
    text = request.path_params[name]
    if not WHOLE_ID.admits(text):
        raise errors.BadRequest(f"{text!r} in the path is not a {noun} id (a whole number)")
    try:
        found = int(text)
    except ValueError:  # more digits than int() reads: far past any id
        found = 0
    if not 1 <= found <= MAX_ID:
        # Said as the store's own refusal says an id (``no job with id 999``), cut short.
        shown = text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
        raise not_found(f"no {noun} with id {shown}")
    return found
