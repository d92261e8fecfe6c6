"""Refusing a name no worker has declared, in a store where no worker has declared anything.

Such a store most often is not the workers' store: the command was given
another ``--store`` or ``TASKQ_STORE`` than they were (or none). The refusal
then names the store and says it declares nothing, rather than blaming the
name, and a SQLite file not there yet is not created to say so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from taskq import errors
from taskq.broker.client.client import Client
from taskq.broker.stores.store_url import SqliteTarget, is_http_url, mask_password, parse_store_url

# What a refusal of a --json-job file's calls of pkg.mod:func names.
FILE_CALLS = "the file's calls"


def refuse_in_new_store(url: str, name: str) -> None:
    """Refuse ``name`` (:class:`taskq.errors.UnknownFunction`) if ``url`` is a SQLite file
    not there yet, which no worker can have declared it in; nothing is created. (A taskq
    serve's store is its own to open: the server refuses the name.)"""
    missing = new_store_file(url)
    if missing is not None:
        said = f"{mask_password(url)} holds no taskq data yet (there is no {missing}): no "
        raise _declares_nothing(f"{said}worker has used this store", name)


def new_store_file(url: str) -> Path | None:
    """The SQLite file ``url`` names, if it is not there yet; else None."""
    if is_http_url(url):
        return None
    target = parse_store_url(url)
    if isinstance(target, SqliteTarget) and not target.path.exists():
        return target.path
    return None


@contextmanager
def store_named_in_refusal(client: Client, url: str, name: str) -> Iterator[None]:
    """Turn the refusal of ``name``, should the store declare no job at all, into one
    that says so and names the store."""
    try:
        yield
    except errors.UnknownFunction as exc:
        if client.functions():
            raise
        said = f"no worker has declared any job in {mask_password(url)}"
        raise _declares_nothing(said, name) from exc


def _declares_nothing(said: str, name: str) -> errors.UnknownFunction:
    """The refusal of ``name`` where, as ``said``, the store declares no job."""
    return errors.UnknownFunction(
        f"{said}, so none has declared {name}; check --store / TASKQ_STORE (the workers' store "
        "must be this one), or pass --unchecked to queue it for workers yet to start",
        field="target",
    )
