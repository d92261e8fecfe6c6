"""Declared jobs in the store: what workers publish of their ``--modules``, and who serves them.

At start a worker publishes each ``@taskq.job`` of its modules
(:func:`function_publish`): its name, parameters, declared options and
docstring's first line. Each distinct declaration of a name is a version,
kept with when it first and last appeared; which worker serves which
version is kept apart, and whether that worker is live is the workers
table's to say. A submit by name takes its defaults from the version
:func:`function_resolve` picks; the SQL is in ``sql/queries/functions.sql``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, from_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import LIVE_SECONDS
from taskq.broker.stores.store import Row, Statement


class Parameter(msgspec.Struct, frozen=True, omit_defaults=True):
    """One parameter of a declared job, as ``inspect`` reads it; values as text.

    ``kind`` is the name of an ``inspect.Parameter`` kind (``POSITIONAL_OR_KEYWORD``...).
    ``default`` is the default's ``repr`` (None: no default); ``annotation`` as written.
    """

    name: str
    kind: str
    default: str | None = None
    annotation: str | None = None

    def text(self) -> str:
        """The parameter as a signature writes it: ``*args``, ``width: int = 800``."""
        stars = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(self.kind, "")
        text = stars + self.name
        if self.annotation is not None:
            text += f": {self.annotation}"
        if self.default is not None:
            text += f" = {self.default}" if self.annotation is not None else f"={self.default}"
        return text


class Declaration(msgspec.Struct, frozen=True):
    """A declared job as a worker publishes it: ``options`` are those of ``@taskq.job``."""

    name: str
    parameters: tuple[Parameter, ...] = ()
    options: dict[str, Any] = {}
    doc: str = ""

    def signature(self) -> str:
        """``pkg.mod:f(path: str, *, width: int = 800)``, with ``/`` and ``*`` where they go."""
        parts: list[str] = []
        kinds = [parameter.kind for parameter in self.parameters]
        for index, parameter in enumerate(self.parameters):
            # A bare * before the first keyword-only parameter, unless *args stands there.
            before = kinds[:index]
            if parameter.kind == "KEYWORD_ONLY" and not {"VAR_POSITIONAL", "KEYWORD_ONLY"} & set(
                before
            ):
                parts.append("*")
            parts.append(parameter.text())
            if parameter.kind == "POSITIONAL_ONLY" and kinds[index + 1 : index + 2] != [
                "POSITIONAL_ONLY"
            ]:
                parts.append("/")
        return f"{self.name}({', '.join(parts)})"

    def encoded(self) -> bytes:
        """The declaration as canonical JSON: keys sorted, so equal ones encode alike."""
        return msgspec.json.encode(self, order="sorted")

    def fingerprint(self) -> str:
        """What tells this version from another declaration of the same name."""
        # Imported here, not with the module: hashlib loads OpenSSL (3 ms), and
        # a worker that declares nothing never takes a fingerprint.
        import hashlib

        return hashlib.sha256(self.encoded()).hexdigest()[:16]


class FunctionVersion(msgspec.Struct, frozen=True):
    """One stored version of a declared job: ``live`` while a live worker serves it."""

    declaration: Declaration
    fingerprint: str
    first_published_at: float
    published_at: float
    published_by: str
    live: bool


class DeclaredFunction(msgspec.Struct, frozen=True):
    """A declared job as listed: the version submits by name use, and who serves it.

    ``queue`` is the one it is declared with (``default`` when none);
    ``versions`` counts the distinct declarations stored for the name;
    ``live`` says whether a live worker serves this version, ``workers``
    which live workers serve any version of it and would claim its jobs
    (they take the queue, and have the labels, that their version declares).
    """

    name: str
    signature: str
    queue: str
    doc: str
    parameters: tuple[Parameter, ...]
    options: dict[str, Any]
    fingerprint: str
    published_at: float
    versions: int
    live: bool
    workers: tuple[str, ...]


def function_publish(
    worker_id: str, declarations: Sequence[Declaration], *, now: float | None = None
) -> Op[None]:
    """Record that ``worker_id`` serves these declarations, and only these, from now on."""
    statements = [
        clock_tick(now),
        Statement(queries.query("function_servers_forget"), {"worker_id": worker_id}),
    ]
    for declaration in declarations:
        names = {
            "worker_id": worker_id,
            "name": declaration.name,
            "fingerprint": declaration.fingerprint(),
        }
        statements.append(
            Statement(
                queries.query("function_version_publish"),
                {**names, "declaration": declaration.encoded().decode()},
            )
        )
        statements.append(Statement(queries.query("function_server_add"), names))
    statements.append(Statement(queries.query("function_servers_prune")))
    # Resending leaves the same rows: each statement sets, none adds up.
    yield Write(statements, idempotent=True)


def function_resolve(name: str) -> Op[FunctionVersion | None]:
    """The version a submit of ``name`` takes its defaults from: the newest a live worker
    serves, else the newest published; None when no worker ever declared ``name``."""
    versions = yield from _versions(name)
    return versions[0] if versions else None


def function_names() -> Op[list[str]]:
    """Every name a worker has declared, sorted (to suggest one close to a misspelt name)."""
    return sorted({version.declaration.name for version in (yield from _versions(None))})


def function_list() -> Op[list[DeclaredFunction]]:
    """Every declared job by name, each with the version submits use and its live workers."""
    versions = yield from _versions(None)
    rows = yield Read(
        Statement(_serving_query("function_live_servers"), {"live_seconds": LIVE_SECONDS})
    )
    serving: dict[str, list[str]] = {}
    for row in rows:
        serving.setdefault(row["name"], []).append(row["worker_id"])
    by_name: dict[str, list[FunctionVersion]] = {}
    for version in versions:
        by_name.setdefault(version.declaration.name, []).append(version)
    listed = []
    for name, each in by_name.items():
        used = each[0]
        declaration = used.declaration
        listed.append(
            DeclaredFunction(
                name=name,
                signature=declaration.signature(),
                queue=declaration.options.get("queue", "default"),
                doc=declaration.doc,
                parameters=declaration.parameters,
                options=declaration.options,
                fingerprint=used.fingerprint,
                published_at=used.published_at,
                versions=len(each),
                live=used.live,
                workers=tuple(serving.get(name, ())),
            )
        )
    return listed


def queue_served_list() -> Op[set[str]]:
    """The queues at least one live worker takes jobs from."""
    rows = yield Read(Statement(queries.query("queue_served_list"), {"live_seconds": LIVE_SECONDS}))
    return {row["queue"] for row in rows}


def _versions(name: str | None) -> Op[list[FunctionVersion]]:
    """Versions by name, each name's first the one submits use (see functions.sql)."""
    rows = yield Read(
        Statement(_serving_query("function_versions"), {"name": name, "live_seconds": LIVE_SECONDS})
    )
    return [_version(row) for row in rows]


def _version(row: Row) -> FunctionVersion:
    return FunctionVersion(
        declaration=msgspec.convert(from_json(row["declaration"]), Declaration),
        fingerprint=row["fingerprint"],
        first_published_at=float(row["first_published_at"]),
        published_at=float(row["published_at"]),
        published_by=row["published_by"],
        live=bool(row["live"]),
    )


def _serving_query(name: str) -> str:
    """The query ``name`` with who serves a version written in, as each of its uses needs."""
    return queries.query(name).format(worker_serves_version=queries.query("worker_serves_version"))
