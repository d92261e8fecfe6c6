"""The console over a real ``taskq serve``: what it shows, what the token allows, a server gone.

One server for the module, over an embedded store of its own seeded with the
console tests' data, with a token that may do everything and one that may
only read. The console is built as ``taskq-tui`` builds it
(:func:`taskq.app.main.open_console_client`) from the server's URL in
``TASKQ_STORE`` and a token in ``TASKQ_TOKEN``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from taskq.app.app import ConsoleApp
from taskq.app.formatting import Clock
from taskq.app.main import open_console_client
from taskq.app.screens.confirm import ConfirmScreen
from taskq.app.source import ConsoleSource, JobFilter
from taskq.app.widgets.banner import StoreBanner
from taskq.app.widgets.tables import QueuesTable
from taskq.app.widgets.totals import Totals
from taskq.broker.client.client import Client
from taskq.broker.client.connect import open_store
from taskq.broker.records import JobState
from taskq.dev.processes import free_ports
from taskq.dev.server import ServerProcess, running_server, token_of, write_server_config
from tests.tui.seed import Seeded, seed
from tests.tui.waiting import plain, select_job, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TOKENS = {"ops": ["read", "submit", "admin"], "viewer": ["read"]}
REFRESH = 0.25


class Served:
    def __init__(self, store_url: str, server: ServerProcess, seeded: Seeded) -> None:
        self.store_url = store_url
        self.server = server
        self.seeded = seeded


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-over-http")
    store_url = f"sqlite://{root / 'taskq.db'}"
    store = open_store(store_url)
    try:
        seeded = seed(store)
    finally:
        store.close()
    config = write_server_config(root / "config.toml", TOKENS)
    with running_server(store_url, config, root / "serve.log") as server:
        yield Served(store_url, server, seeded)


def _app(url: str, token: str | None, monkeypatch: pytest.MonkeyPatch) -> ConsoleApp:
    """The console as ``taskq-tui`` makes it, from ``TASKQ_STORE`` and ``TASKQ_TOKEN``."""
    monkeypatch.setenv("TASKQ_STORE", url)
    if token is None:
        monkeypatch.delenv("TASKQ_TOKEN", raising=False)
    else:
        monkeypatch.setenv("TASKQ_TOKEN", token_of(token))
    client = open_console_client(None, None)
    assert client.http is not None
    return ConsoleApp(ConsoleSource(client), refresh_seconds=REFRESH, clock=Clock())


def _noting(app: ConsoleApp) -> list[str]:
    """The messages the app shows as notifications from now on."""
    notes: list[str] = []
    shown = app.notify

    def noted(message: str, **options: Any) -> None:
        notes.append(message)
        shown(message, **options)

    app.notify = noted  # type: ignore[method-assign]
    return notes


async def _cancel_from_the_list(
    pilot: Pilot[None], app: ConsoleApp, job_filter: JobFilter, job_id: int
) -> None:
    """Show the jobs of ``job_filter``, select ``job_id``, press cancel and confirm it."""
    await select_job(pilot, app, job_filter, job_id)
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
    await pilot.press("y")


def _state(served: Served, job_id: int) -> JobState:
    with Client(served.store_url, import_names=False) as client:
        return client.get(job_id).state


async def test_the_console_shows_the_store_behind_a_taskq_serve(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(served.server.url, "ops", monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        queues = app.screen.query_one(QueuesTable)
        await wait_for(pilot, lambda: queues.row_count == 3, "the queues")
        assert app.problem is None
        assert app.sub_title == served.server.url
        # The server's store is an embedded one: the console says so, from its nodes.
        assert "embedded SQLite" in plain(app.screen.query_one(Totals))

        await _cancel_from_the_list(pilot, app, JobFilter(queue="images"), served.seeded.queued)
        await wait_for(
            pilot,
            lambda: _state(served, served.seeded.queued) is JobState.CANCELLED,
            "the job cancelled through the server",
        )


async def test_an_action_the_token_may_not_take_is_refused_in_a_notice(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(served.server.url, "viewer", monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = _noting(app)
        queues = app.screen.query_one(QueuesTable)
        await wait_for(pilot, lambda: queues.row_count == 3, "the queues, read with the token")
        await _cancel_from_the_list(
            pilot, app, JobFilter(state=JobState.RUNNING), served.seeded.running
        )
        await wait_for(
            pilot, lambda: any("refused by the server" in note for note in notes), "the refusal"
        )
        assert app.is_running
        assert _state(served, served.seeded.running) is JobState.RUNNING


async def test_no_token_and_no_server_are_shown_in_the_banner(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(served.server.url, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        banner = app.screen.query_one(StoreBanner)
        await wait_for(pilot, lambda: banner.has_class("-visible"), "the banner")
        assert "refused by the server" in plain(banner)
        assert "token" in plain(banner)

    [port] = free_ports(1)
    app = _app(f"http://127.0.0.1:{port}", "ops", monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        banner = app.screen.query_one(StoreBanner)
        # The console's requests give up within its HTTP timeout (5 s), then it says so.
        await wait_for(pilot, lambda: banner.has_class("-visible"), "the banner", timeout=60)
        assert "store unreachable" in plain(banner)
        assert app.is_running
