"""The submit form at small and large terminals: it fits, its buttons can be pressed,
and what is wrong is on screen, with the cursor on the first bad field.

Visibility is checked three ways, because a widget laid out below the screen
still has a region and still holds its text: the widget's region lies inside
the screen, the compositor finds that very widget at its corners (so nothing
clips or covers it), and its text is in what the screen draws.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Static

from taskq.app.app import ConsoleApp
from taskq.app.screens.submit import SubmitScreen
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import MAX_PAYLOAD_BYTES
from taskq.broker.ops.jobs import job_list
from taskq.broker.records import Job, JobState
from taskq.broker.stores.store import Store
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

AppFactory = Callable[..., ConsoleApp]
SnapCompare = Callable[..., bool]

SIZES = [pytest.param(size, id=f"{size[0]}x{size[1]}") for size in ((80, 24), (120, 40), (160, 45))]


def screen_text(app: ConsoleApp) -> str:
    """The screen as drawn, as plain text: one line per terminal row."""
    width, height = app.size
    console = Console(width=width, height=height, record=True, file=io.StringIO())
    # The same full render that App.export_screenshot draws, without the SVG.
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def assert_shown(app: ConsoleApp, widget: Widget) -> None:
    """``widget`` is drawn whole: inside the screen, and not clipped or covered."""
    screen = app.screen
    region = widget.region
    assert region.area, f"{widget!r} has no area"
    assert screen.region.contains_region(region), (
        f"{widget!r} at {region} is not inside the {screen.size} screen"
    )
    for x, y in (region.offset, (region.right - 1, region.bottom - 1)):
        top, _ = screen.get_widget_at(x, y)
        assert top is widget or widget in top.ancestors, (
            f"{widget!r} is not drawn at ({x}, {y}): {top!r} is"
        )


async def open_form(pilot: Pilot[None], app: ConsoleApp) -> SubmitScreen:
    """Press ``n``; check the form's buttons can be seen; return the form."""
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen), "the form")
    form = app.screen
    assert isinstance(form, SubmitScreen)
    await pilot.pause()
    for button in form.query(Button):
        assert_shown(app, button)
    drawn = screen_text(app)
    assert "Submit (ctrl+s)" in drawn
    assert "Back (esc)" in drawn
    return form


def fill(form: SubmitScreen, **values: str) -> None:
    for field, value in values.items():
        form.query_one(f"#{field}", Input).value = value


def tick_unchecked(form: SubmitScreen) -> None:
    """Opt out of the check: no worker of these tests declares the targets they submit."""
    form.query_one("#unchecked", Checkbox).value = True


async def press_send(pilot: Pilot[None], form: SubmitScreen) -> None:
    """Click Submit, as a user does (the click itself moves the focus to the button)."""
    send = form.query_one("#send", Button)
    # A button ignores clicks while it still shows the last press (-active).
    await wait_for(pilot, lambda: not send.has_class("-active"), "Submit to be pressable")
    await pilot.click(send)


async def submit_and_expect(
    pilot: Pilot[None], app: ConsoleApp, form: SubmitScreen, message: str, field: str
) -> None:
    """Click Submit; ``message`` must be drawn, the form stay open, the cursor go to ``field``."""
    await press_send(pilot, form)
    error = form.query_one("#submit-error", Static)
    bad = form.query_one(f"#{field}", Input)
    await wait_for(
        pilot,
        lambda: message in plain(error) and app.focused is bad,
        f"the error {message!r} and the cursor in {field}",
    )
    await pilot.pause()
    assert app.screen is form
    assert bad.has_class("-problem")
    assert_shown(app, error)
    assert_shown(app, bad)
    assert message in screen_text(app)
    for button in form.query(Button):
        assert_shown(app, button)


@pytest.mark.parametrize("size", SIZES)
async def test_an_empty_submit_says_what_is_wrong(
    sqlite_store: Store, make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        form = await open_form(pilot, app)
        form.query_one("#args", Input).focus()
        await submit_and_expect(pilot, app, form, "target must look like", "target")


@pytest.mark.parametrize("size", SIZES)
async def test_bad_fields_are_named_and_the_first_gets_the_cursor(
    sqlite_store: Store, make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        form = await open_form(pilot, app)
        fill(form, target="", args='["new.png", 640')
        await submit_and_expect(pilot, app, form, "target must look like", "target")
        await submit_and_expect(pilot, app, form, "arguments are not JSON", "target")

        fill(form, target="lab.images:resize")
        await submit_and_expect(pilot, app, form, "arguments are not JSON", "args")
        assert "target must" not in screen_text(app)

        fill(form, args='"new.png"')
        await submit_and_expect(pilot, app, form, "must be a JSON array or object", "args")

        fill(form, args="[]", queue="")
        await submit_and_expect(pilot, app, form, "queue must", "queue")


@pytest.mark.parametrize("size", SIZES)
async def test_a_broker_refusal_points_at_its_field(
    sqlite_store: Store, make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        form = await open_form(pilot, app)
        too_big = json.dumps(["x" * MAX_PAYLOAD_BYTES])
        fill(form, target="lab.images:resize", args=too_big)
        tick_unchecked(form)
        form.query_one("#priority", Input).focus()
        await submit_and_expect(pilot, app, form, "the payload (arguments included)", "args")


@pytest.mark.parametrize("size", SIZES)
async def test_a_valid_submit_queues_the_job(
    sqlite_store: Store, make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        form = await open_form(pilot, app)
        await submit_and_expect(pilot, app, form, "target must look like", "target")
        fill(form, target="lab.images:resize", args='{"path": "new.png"}', queue="thumbs")
        fill(form, priority="5")
        await submit_and_expect(pilot, app, form, "no worker has declared", "target")
        assert "tick unchecked" in screen_text(app)
        tick_unchecked(form)
        await press_send(pilot, form)
        await wait_for(pilot, lambda: app.screen is not form, "the form closed")

        def submitted() -> list[Job]:
            return plan.run(sqlite_store, job_list(queue="thumbs", limit=5))

        await wait_for(pilot, submitted, "the job in the store")
        [job] = submitted()
        assert job.payload == {
            "target": "lab.images:resize",
            "args": [],
            "kwargs": {"path": "new.png"},
        }
        assert job.priority == 5
        assert job.state is JobState.QUEUED


@pytest.mark.parametrize("size", SIZES)
async def test_back_closes_the_form_without_a_job(
    sqlite_store: Store, make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        form = await open_form(pilot, app)
        fill(form, target="lab.images:resize", queue="thumbs")
        await pilot.click("#back")
        await wait_for(pilot, lambda: app.screen is not form, "the form closed")
        assert plan.run(sqlite_store, job_list(queue="thumbs", limit=5)) == []
