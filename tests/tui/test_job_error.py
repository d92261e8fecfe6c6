"""A failed job's view: its traceback drawn once, with the attempt that raised it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Static

from taskq.app.app import ConsoleApp
from taskq.app.widgets.panels import AttemptOutput, ResultPanel
from taskq.app.widgets.tables import AttemptsTable
from tests.tui.seed import Seeded
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

# A line of the traceback the seed stores with the failed job and its attempt.
FRAME = 'File "lab/sims.py", line 42, in run'


async def test_a_failed_jobs_traceback_is_shown_once_in_its_attempts_output(
    seeded: Seeded, make_app: Callable[..., ConsoleApp]
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(seeded.failed)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        output = app.screen.query_one(AttemptOutput)
        result = app.screen.query_one(ResultPanel)
        await wait_for(pilot, lambda: FRAME in plain(output), "the attempt's traceback")
        await wait_for(pilot, lambda: result.border_title == "Last error", "the job's error")

        shown = [plain(widget) for widget in app.screen.query(Static)]
        assert sum(text.count(FRAME) for text in shown) == 1, "\n".join(shown)
        # The job's own panel still says what went wrong, in one line.
        assert "ValueError: seed 1 is not allowed" in plain(result)
        assert FRAME not in plain(result)
