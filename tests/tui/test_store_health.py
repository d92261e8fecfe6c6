"""The store banner (unreachable, no leader), its recovery, and polls that never pile up."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from taskq.app.app import ConsoleApp
from taskq.app.widgets.banner import StoreBanner
from taskq.app.widgets.tables import JobsTable, QueuesTable
from taskq.broker.stores.store import Store
from tests.tui.seed import Seeded
from tests.tui.switchable_store import SwitchableStore
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

AppFactory = Callable[..., ConsoleApp]


def _banner(app: ConsoleApp) -> StoreBanner:
    return app.screen.query_one(StoreBanner)


def _shown(app: ConsoleApp) -> bool:
    return _banner(app).has_class("-visible")


async def test_banner_while_the_store_is_unreachable_and_recovery(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    store = SwitchableStore(sqlite_store)
    app = make_app(store)
    async with app.run_test(size=(120, 40)) as pilot:
        queues = app.screen.query_one(QueuesTable)
        await wait_for(pilot, lambda: queues.row_count == 3, "the queues")
        assert not _shown(app)

        store.reachable = False
        await wait_for(pilot, lambda: _shown(app), "the banner")
        assert "store unreachable" in plain(_banner(app))
        assert queues.row_count == 3  # the last data stays, under the banner

        # Every view shows it, and the jobs list keeps its rows while the store is away.
        store.reachable = True
        await pilot.press("j")
        table = app.screen.query_one(JobsTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the jobs list")
        store.reachable = False
        await wait_for(pilot, lambda: _shown(app), "the banner on the jobs view")
        assert table.row_count > 0

        store.reachable = True
        await wait_for(pilot, lambda: not _shown(app), "the banner to go away")
        assert app.problem is None


async def test_banner_when_the_store_has_no_leader(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    store = SwitchableStore(sqlite_store)
    app = make_app(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.overview is not None, "the first overview")
        store.leader = False
        await wait_for(pilot, lambda: _shown(app), "the banner")
        assert "no leader" in plain(_banner(app))
        store.leader = True
        await wait_for(pilot, lambda: not _shown(app), "the banner to go away")


async def test_a_slow_store_never_sees_two_polls_at_once(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    # Each request takes longer than the refresh interval: were polls booked
    # by a timer regardless of the last one, they would overlap.
    store = SwitchableStore(sqlite_store, delay=0.4)
    app = make_app(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: store.requests >= 12, "three overview polls", timeout=30)
        assert store.most_in_flight == 1
