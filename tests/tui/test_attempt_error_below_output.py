"""A failed attempt's output panel: what it printed, then where it failed, as a terminal
shows a crash, so that the panel, opened at its end, opens on the traceback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from taskq.app.app import ConsoleApp
from taskq.app.widgets.panels import AttemptOutput
from taskq.app.widgets.tables import AttemptsTable
from tests.tui.seed import Seeded
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

# The seed's failed job printed these lines, then raised with this traceback.
LAST_PRINTED = "step 6100"
FRAME = 'File "lab/sims.py", line 42, in run'


async def test_a_failed_attempts_traceback_comes_after_what_it_printed(
    seeded: Seeded, make_app: Callable[..., ConsoleApp]
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(seeded.failed)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        output = app.screen.query_one(AttemptOutput)
        await wait_for(pilot, lambda: FRAME in plain(output), "the attempt's traceback")
        text = plain(output)
        assert text.index(LAST_PRINTED) < text.index(FRAME), text
        # The error's own line ends the panel, where it opens.
        assert text.rstrip().endswith("ValueError: seed 1 is not allowed"), text
