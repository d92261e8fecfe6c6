"""The submit form offers the jobs workers declare: their signatures, queues and checks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Input, Label

from taskq.app.app import ConsoleApp
from taskq.broker.ops import plan
from taskq.broker.ops.functions import Declaration, Parameter, function_publish
from taskq.broker.ops.jobs import job_list
from taskq.broker.records import Job
from taskq.broker.stores.store import Store
from tests.tui.test_submit_form import fill, open_form, press_send, submit_and_expect
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

NAME = "lab.texts:count_words"


@pytest.fixture
def declared(sqlite_store: Store) -> None:
    """A worker's publication of count_words: queue texts, priority 3, 5 attempts."""
    declaration = Declaration(
        name=NAME,
        parameters=(Parameter("path", "POSITIONAL_OR_KEYWORD", annotation="str"),),
        options={"queue": "texts", "priority": 3, "max_attempts": 5},
    )
    plan.run(sqlite_store, function_publish("w1", [declaration]))


@pytest.mark.usefixtures("declared")
async def test_a_declared_target_shows_its_signature_and_submits_as_declared(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        await wait_for(pilot, lambda: NAME in form.declared, "the declared jobs read")
        fill(form, target=NAME)
        label = form.query_one("#target-label", Label)
        await wait_for(pilot, lambda: "count_words(path: str)" in plain(label), "the signature")
        assert form.query_one("#queue", Input).value == "texts"
        assert form.query_one("#priority", Input).value == "3"

        fill(form, args='["a.txt", 2]')
        await submit_and_expect(pilot, app, form, "refuses these", "args")

        fill(form, args='["a.txt"]')
        await press_send(pilot, form)
        await wait_for(pilot, lambda: app.screen is not form, "the form closed")

        def submitted() -> list[Job]:
            return plan.run(sqlite_store, job_list(queue="texts", limit=5))

        await wait_for(pilot, submitted, "the job in the store")
        [job] = submitted()
        assert (job.priority, job.max_attempts) == (3, 5)
