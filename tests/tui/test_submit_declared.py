"""The submit form offers the jobs workers declare: their signatures, queues and checks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Label, Static

from taskq.app.app import ConsoleApp
from taskq.app.screens.submit import SubmitScreen
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


async def _open_declared_form(pilot: Pilot[None], app: ConsoleApp) -> SubmitScreen:
    """The form, once it has read the declared jobs."""
    form = await open_form(pilot, app)
    await wait_for(pilot, lambda: NAME in form.declared, "the declared jobs read")
    return form


@pytest.mark.usefixtures("declared")
async def test_a_declared_target_shows_its_signature_and_submits_as_declared(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        form = await _open_declared_form(pilot, app)
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


@pytest.mark.usefixtures("declared")
async def test_an_undeclared_target_is_refused_with_the_closest_names_unless_unchecked(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        form = await _open_declared_form(pilot, app)
        misspelt = NAME.replace("count_words", "count_word")
        fill(form, target=misspelt, args='["a.txt"]', queue="typos")
        await submit_and_expect(pilot, app, form, "did you mean", "target")
        assert f"did you mean {NAME}?" in plain(form.query_one("#submit-error", Static))

        def submitted() -> list[Job]:
            return plan.run(sqlite_store, job_list(queue="typos", limit=5))

        assert submitted() == []
        form.query_one("#unchecked", Checkbox).value = True
        await press_send(pilot, form)
        await wait_for(pilot, lambda: app.screen is not form, "the form closed")
        await wait_for(pilot, submitted, "the job in the store")
        [job] = submitted()
        assert job.payload["target"] == misspelt
