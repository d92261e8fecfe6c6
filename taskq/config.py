"""Reading taskq's TOML configuration, with clear errors for typos.

The file is optional. It is found at an explicit path, else at
``TASKQ_CONFIG``, else at ``config.toml`` in the user's config directory.
Unknown sections and keys are errors, not silently ignored: a misspelt
``[stroe]`` would otherwise send jobs to the default store. Each is told
with the known one closest to it, if any (:func:`closest_known`).

Each section is a msgspec Struct that forbids unknown fields, so its keys,
their types and their ranges are declared once, on the Struct.
:func:`converted` turns msgspec's complaint into one line that names the key
and what it must be. The ``[worker]`` section is the worker's: it is read
here as a table and checked by ``taskq.worker.settings``, which merges the
command line's flags into it first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import inspect

from taskq import errors
from taskq.close_names import closest
from taskq.retry import RetryPolicy, parse_retry

CONFIG_ENV = "TASKQ_CONFIG"

_Converted = TypeVar("_Converted")


class StoreSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[store]`` section."""

    url: str | None = None


Scope = Literal["read", "submit", "admin"]
_Name = Annotated[str, msgspec.Meta(min_length=1)]
_Hex = Annotated[
    str,
    msgspec.Meta(pattern="^[0-9a-f]{64}$", extra_json_schema={"description": "64 hex digits"}),
]


class TokenSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One ``[[server.tokens]]`` entry: who holds it, what it may do, and the secret.

    The secret is given as ``sha256`` (the hex digest of the token, so the
    file holds nothing a reader could present) or, for a test set-up, as
    ``token`` itself.
    """

    name: _Name
    scopes: list[Scope]
    sha256: _Hex | None = None
    token: _Name | None = None


class ServerSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[server]`` section: where ``taskq serve`` listens, its TLS files, its tokens."""

    listen: str = "127.0.0.1:8080"
    tls_cert: str | None = None
    tls_key: str | None = None
    tokens: list[TokenSection] = []
    # A line per request on stderr: off by default, since writing it was a
    # tenth of the server's CPU for a POST /jobs; errors are logged either way.
    access_log: bool = False


_Positive = Annotated[int, msgspec.Meta(gt=0)]
_Size = (
    _Positive
    | Annotated[
        str,
        msgspec.Meta(
            pattern=r"^[\t-\r ]*0*[1-9][0-9]*[\t-\r ]*(?:[Bb]|[KkMmGgTt][Ii][Bb])?[\t-\r ]*$",
            extra_json_schema={"description": "a size such as '512MiB' or '2GiB'"},
        ),
    ]
)


class QueueLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A ``[queues.NAME.limits]`` table, checked as the file is read.

    The client sends the table on as written, and the store's own parser
    (``taskq.broker.limits``) reads it at each submit; this Struct is here so
    that a misspelt limit (``memroy``) or a value of the wrong kind is refused
    when the file is read, naming the file and the queue, rather than at the
    first submit to that queue. It may not import that parser (the config sits
    below the broker), so its fields repeat the parser's names; a test holds
    the two in step.
    """

    memory_bytes: _Size | None = None
    cpu_seconds: _Positive | None = None
    wall_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    open_files: _Positive | None = None
    log_tail_bytes: _Size | None = None
    output_bytes: _Size | None = None
    result_bytes: _Size | None = None
    processes: _Positive | None = None


class QueueSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A ``[queues.NAME]`` table: what the queue's jobs, submitted by a client that reads
    this file, get when they say none.

    It comes before the defaults stored with the queue (``taskq queue set``),
    which every client's jobs get; ``limits`` merge name by name, the job's own
    over these. ``retry`` holds a ``taskq.RetryPolicy``'s fields.
    """

    timeout: Annotated[float, msgspec.Meta(gt=0)] | None = None
    max_attempts: Annotated[int, msgspec.Meta(ge=1)] | None = None
    limits: dict[str, Any] = {}
    retry: dict[str, Any] | None = None


class _ConfigFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A whole config file: its sections."""

    store: StoreSection = StoreSection()
    worker: dict[str, Any] = {}
    server: ServerSection = ServerSection()
    # Each table is converted on its own, so that a complaint can name its queue.
    queues: dict[str, dict[str, Any]] = {}


class Config(msgspec.Struct, frozen=True):
    """Settings read from a config file; every field has a usable default."""

    store_url: str | None = None
    worker: dict[str, Any] = {}
    server: ServerSection = ServerSection()
    source: Path | None = None
    queues: dict[str, QueueSection] = {}


def default_config_path() -> Path:
    # Imported here, as is tomllib where a file is read: a worker given its
    # config and store needs neither, and a worker's start-up counts towards
    # its first jobs' wait.
    import platformdirs

    return Path(platformdirs.user_config_dir("taskq")) / "config.toml"


def tokens_named(text: str, name: str) -> bool:
    """Whether ``text`` (TOML: a ``[[server.tokens]]`` entry) names a token ``name``."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return any(token.get("name") == name for token in data.get("server", {}).get("tokens", []))


def config_file_read(path: str | Path | None = None) -> Path | None:
    """The file :func:`load_config` reads for ``path``: it, ``TASKQ_CONFIG``, else the
    user's if there is one; None when there is none to read."""
    explicit = path or os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    default = default_config_path()
    return default if default.is_file() else None


def load_config(path: str | Path | None = None) -> Config:
    """Load the configuration; an explicitly named file must exist and parse."""
    explicit = path or os.environ.get(CONFIG_ENV)
    if explicit:
        config_path = Path(explicit).expanduser()
        if not config_path.is_file():
            raise errors.ConfigError(f"config file {config_path} does not exist")
    else:
        config_path = default_config_path()
        if not config_path.is_file():
            return Config()
    import tomllib

    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise errors.ConfigError(f"config file {config_path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise errors.ConfigError(f"config file {config_path} cannot be read: {exc}") from exc
    file = converted(data, _ConfigFile, prefix=f"{config_path}: ")
    queues = {}
    for name, table in file.queues.items():
        where = f"queues.{name}"
        prefix = f"{config_path}: [{where}] "
        try:
            queues[name] = converted(table, QueueSection, prefix=prefix, section=where)
        except errors.ConfigError as exc:
            raise errors.ConfigError(f"{exc}{_queue_hint(name, table)}") from None
        # Checked alone, so that a complaint names [queues.NAME.limits] and its key.
        converted(
            queues[name].limits,
            QueueLimits,
            prefix=f"{config_path}: [{where}.limits] ",
            section=f"{where}.limits",
        )
        retry = queues[name].retry
        if retry is not None:
            try:
                parse_retry(retry)
            except errors.InvalidJob as exc:
                fields = RetryPolicy.__struct_fields__
                meant = closest_known([key for key in retry if key not in fields], fields)
                raise errors.ConfigError(f"{prefix}{exc}{meant}") from None
    return Config(
        store_url=file.store.url,
        worker=file.worker,
        server=file.server,
        source=config_path,
        queues=queues,
    )


# Keys an operator may put in [queues.NAME] that are the store's, set for every client by
# a command rather than for this machine's submits: said with the command that sets them.
_STORE_SETTINGS = {
    "max_running": "taskq limit {} --max-running N",
    "rate": "taskq limit {} --rate N/PERIOD",
    "paused": "taskq pause {}",
}


def _queue_hint(queue: str, table: Mapping[str, Any]) -> str:
    """What a refused ``[queues.NAME]`` table meant, where a key of it says so."""
    hints = [
        f"{key} is set in the store, for every client: {command.format(queue)}"
        for key, command in _STORE_SETTINGS.items()
        if key in table
    ]
    limits = sorted(key for key in table if key in QueueLimits.__struct_fields__)
    if limits:
        goes = "goes" if len(limits) == 1 else "go"
        hints.append(f"{', '.join(limits)} {goes} under [queues.{queue}.limits]")
    return "".join(f"; {hint}" for hint in hints)


def converted(
    data: Mapping[str, Any],
    into: type[_Converted],
    *,
    prefix: str,
    section: str | None = None,
) -> _Converted:
    """``data`` as the Struct ``into``, or a ConfigError naming the key at fault.

    ``section`` names the table ``data`` is (None: a whole file, whose keys
    are sections); ``prefix`` starts every message.
    """
    try:
        return msgspec.convert(data, into)
    except msgspec.ValidationError as exc:
        complaint = _Complaint(str(exc), data, inspect.type_info(into), section)
        raise errors.ConfigError(prefix + complaint.line()) from None


# msgspec's messages end with where the fault is, as in " - at `$.store.url`"
# or " - at `$.queues[1]`"; an unknown field is the one fault it names by key.
_WHERE = re.compile(r"(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `")


class _Complaint:
    """One msgspec ValidationError, told in the words of a config file."""

    def __init__(
        self, message: str, data: Mapping[str, Any], root: inspect.Type, section: str | None
    ) -> None:
        match = _WHERE.fullmatch(message)
        assert match is not None  # the pattern matches any text
        self.problem = match["problem"]
        steps: list[str | int] = [
            key or int(index) for key, index in _STEP.findall(match["path"] or "")
        ]
        # The keys name the place; an index (``[[server.tokens]]``) only picks
        # the table whose keys or value are shown.
        self.steps = steps
        self.keys = [step for step in steps if isinstance(step, str)]
        self.data = data
        self.root = root
        self.section = section

    def line(self) -> str:
        if _UNKNOWN_FIELD.match(self.problem):
            return self._unknown_keys()
        if not self.keys:  # not a table at all: the caller reads tables only
            return self.problem
        *tables, key = self.keys
        place = f"[{self._table_name(tables)}] " if tables else ""
        must_be = _describe(self._type_at(self.keys))
        # An index at the end is left out: the message shows the whole list.
        value_at = list(self.steps)
        while value_at and isinstance(value_at[-1], int):
            value_at.pop()
        return f"{place}{key} must be {must_be}, got {self._value_at(value_at)!r}"

    def _unknown_keys(self) -> str:
        table = self._value_at(self.steps)
        known = sorted(field.name for field in _fields(self._type_at(self.keys)))
        unknown = sorted(set(table) - set(known))
        if self.section is None and not self.keys:
            names = ", ".join(f"[{name}]" for name in unknown)
            noun = "section" if len(unknown) == 1 else "sections"
            meant = closest_known(unknown, known, shown="[{}]")
            return f"unknown {noun} {names}; known: {', '.join(known)}{meant}"
        return (
            f"unknown key(s) {', '.join(unknown)} in [{self._table_name(self.keys)}]; "
            f"known: {', '.join(known)}{closest_known(unknown, known)}"
        )

    def _table_name(self, keys: list[str]) -> str:
        return ".".join([self.section, *keys] if self.section else keys)

    def _value_at(self, steps: list[str | int]) -> Any:
        value: Any = self.data
        for step in steps:
            value = value[step]
        return value

    def _type_at(self, keys: list[str]) -> inspect.Type:
        found = self.root
        for key in keys:
            found = next(field.type for field in _fields(found) if field.name == key)
        return found


def closest_known(unknown: Iterable[str], known: Sequence[str], *, shown: str = "{}") -> str:
    """``; did you mean concurrency?``: the known key closest to each unknown one of a
    table, for every table of the file that refuses unknown keys ("" when none is close).
    ``shown`` writes a name as the message does (``[{}]``, a section's)."""
    matches = (closest(name, known) for name in unknown)
    close = dict.fromkeys(shown.format(match) for match in matches if match)
    return f"; did you mean {' and '.join(close)}?" if close else ""


def _fields(table: inspect.Type) -> tuple[inspect.Field, ...]:
    # A list of tables (``[[server.tokens]]``) is named by its key alone: the
    # message's path skips the index, so look through the list to its tables.
    if isinstance(table, inspect.ListType):
        return _fields(table.item_type)
    return table.fields if isinstance(table, inspect.StructType) else ()


def _describe(kind: inspect.Type) -> str:
    """What a value of ``kind`` must be, in a config file's words: "a whole number >= 1"."""
    if isinstance(kind, inspect.Metadata):
        description = (kind.extra_json_schema or {}).get("description")
        return str(description) if description else _describe(kind.type)
    if isinstance(kind, inspect.UnionType):
        # TOML has no null: a None alternative is a default, never a value to write.
        kinds = [_describe(one) for one in kind.types if not isinstance(one, inspect.NoneType)]
        return " or ".join(kinds)
    if isinstance(kind, inspect.BoolType):
        return "true or false"
    if isinstance(kind, inspect.IntType | inspect.FloatType):
        noun = "a whole number" if isinstance(kind, inspect.IntType) else "a number"
        bounds = [
            f"{sign} {bound}"
            for sign, bound in ((">=", kind.ge), (">", kind.gt), ("<=", kind.le), ("<", kind.lt))
            if bound is not None
        ]
        return " ".join([noun, " and ".join(bounds)]) if bounds else noun
    if isinstance(kind, inspect.StrType):
        return "a non-empty string" if kind.min_length else "a string"
    if isinstance(kind, inspect.LiteralType):
        return f"one of {', '.join(str(value) for value in kind.values)}"
    if isinstance(
        kind,
        inspect.ListType | inspect.VarTupleType | inspect.SetType | inspect.FrozenSetType,
    ):
        each = _describe(kind.item_type)
        return f"a {'non-empty ' if kind.min_length else ''}list, each {each}"
    if isinstance(kind, inspect.StructType | inspect.DictType | inspect.DataclassType):
        return "a table"
    return f"a {type(kind).__name__.removesuffix('Type').lower()}"
