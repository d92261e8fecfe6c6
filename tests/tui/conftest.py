"""Fixtures for the console tests: a real SQLite store, seeded, and the app over it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path

import pytest

from taskq.app.app import ConsoleApp
from taskq.app.formatting import Clock
from taskq.app.source import ConsoleSource
from taskq.broker.client.client import AsyncClient
from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Store
from tests.tui.seed import BASE, Seeded, seed

REFRESH = 0.25
"""Seconds between polls in tests: fast, so waits are short; every wait is still bounded."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A fresh, migrated SQLite store in a temporary file."""
    store = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def seeded(sqlite_store: Store) -> Seeded:
    """The store filled with the deterministic data of :mod:`tests.tui.seed`."""
    return seed(sqlite_store)


@pytest.fixture
def fixed_clock() -> Clock:
    """The console's clock stopped at the seed's "now", in UTC."""
    return Clock(now=lambda: BASE, tz=UTC)


@pytest.fixture
def make_app(sqlite_store: Store, fixed_clock: Clock) -> Callable[..., ConsoleApp]:
    """Build the real app over a store (the seeded one unless told otherwise)."""

    def build(store: Store | None = None, *, page_size: int = 100) -> ConsoleApp:
        source = ConsoleSource(
            AsyncClient(store=store or sqlite_store, import_names=False), page_size=page_size
        )
        return ConsoleApp(source, refresh_seconds=REFRESH, clock=fixed_clock)

    return build
