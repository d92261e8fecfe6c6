"""Time the console on a store of 1,000,000 jobs: opening the jobs view, and filters.

Fills an SQLite store through the broker's own enqueue (batches of 10,000
jobs, one request each), moves some jobs to other states, then runs the real
console with Textual's pilot: each key press is timed until the jobs table
shows the rows it asked for. The goal is under a second for each.

    .venv/bin/python -m bench.tui [--jobs 1000000] [--store FILE] [--keep]

An existing ``--store`` file with enough jobs is reused, so a second run
measures at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from textual.widgets import Input

from taskq.app import filter_query
from taskq.app.app import ConsoleApp
from taskq.app.screens.jobs import JobsScreen
from taskq.app.source import ConsoleSource, JobFilter
from taskq.app.widgets.tables import JobsTable
from taskq.broker.client.client import AsyncClient, call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_cancel, job_list
from taskq.broker.ops.leases import Report, ReportKind, job_report
from taskq.broker.ops.queues import job_counts
from taskq.broker.ops.workers import worker_register
from taskq.broker.records import AttemptReport, JobState
from taskq.broker.stores.store import Store

BATCH = 10_000
QUEUES = ("images", "sims", "etl", "reports")
GOAL_SECONDS = 1.0
TIMEOUT_SECONDS = 30.0


def fill(store: Store, total: int) -> None:
    """Enqueue ``total`` jobs (skipping those already there), then give some other states."""
    present = sum(sum(stats.counts.values()) for stats in plan.run(store, job_counts()))
    started = time.perf_counter()
    for first in range(present, total, BATCH):
        specs = [
            call_spec(
                "lab.images:resize",
                [f"scan-{n:07d}.png", 800],
                queue=QUEUES[n % len(QUEUES)],
                idempotency_key=f"bench-{n}",
            )
            for n in range(first, min(first + BATCH, total))
        ]
        plan.run(store, job_enqueue(specs))
        done = first + len(specs)
        rate = (done - present) / (time.perf_counter() - started)
        print(f"\r  enqueued {done:,} of {total:,} ({rate:,.0f} jobs/s)", end="", flush=True)
    if present < total:
        print()
        _vary_states(store)


def _vary_states(store: Store) -> None:
    """Some succeeded, failed and cancelled jobs, so that state filters find rows."""
    worker = "bench-worker-1"
    plan.run(
        store,
        worker_register(
            worker, name="bench", host="bench", pid=os.getpid(), queues=QUEUES, labels=(), slots=8
        ),
    )
    for round_ in range(3):
        claimed = plan.run(store, job_claim(worker, QUEUES, limit=1000, lease_seconds=600))
        reports = []
        for index, job in enumerate(claimed):
            if index % 10 == 0:
                error = {"type": "ValueError", "message": f"bad scan in round {round_}"}
                attempt = AttemptReport(outcome="error")
                reports.append(
                    Report(job.lease, ReportKind.FAIL, attempt, error=error, retryable=False)
                )
            else:
                attempt = AttemptReport(outcome="succeeded", exit_code=0, cpu_seconds=0.5)
                reports.append(Report(job.lease, ReportKind.COMPLETE, attempt, result={"ok": True}))
        plan.run(store, job_report(reports))
    queued = plan.run(store, job_list(state=JobState.QUEUED, queue="etl", limit=1000))
    plan.run(store, job_cancel([job.id for job in queued]))


async def measure(store: Store) -> list[tuple[str, float]]:
    """Run the console and time each step until the table shows the page it asked for."""
    app = ConsoleApp(
        ConsoleSource(AsyncClient(store=store, import_names=False)), refresh_seconds=1.0
    )
    results: list[tuple[str, float]] = []

    def jobs_screen() -> JobsScreen | None:
        screen = app.screen
        return screen if isinstance(screen, JobsScreen) and screen.is_mounted else None

    def showing(job_filter: JobFilter, page: int = 1) -> Callable[[], bool]:
        """True once the table shows a non-empty page of ``job_filter``, ``page`` deep."""

        def shown() -> bool:
            screen = jobs_screen()
            if screen is None or screen.page is None or screen.cursors.page_number != page:
                return False
            rows = [str(job.id) for job in screen.page.jobs]
            table = screen.query_one(JobsTable)
            return screen.page.job_filter == job_filter and bool(rows) and table.row_keys() == rows

        return shown

    async def until(done: Callable[[], bool], what: str) -> None:
        deadline = time.perf_counter() + TIMEOUT_SECONDS
        while not done():
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{what}: not done after {TIMEOUT_SECONDS:g} s")
            await asyncio.sleep(0.002)

    async def timed(what: str, key: str, done: Callable[[], bool]) -> None:
        # simulate_key posts the key as a terminal would, without the pilot's idle waits.
        started = time.perf_counter()
        app.simulate_key(key)
        await until(done, what)
        results.append((what, time.perf_counter() - started))

    async def filtered(line: str) -> None:
        screen = jobs_screen()
        assert screen is not None
        filter_input = screen.query_one("#filter", Input)
        app.simulate_key("slash")
        await until(lambda: app.focused is filter_input, "focus on the filter")
        filter_input.value = line
        await timed(f"filter {line}", "enter", showing(filter_query.parse(line)))

    async with app.run_test(size=(120, 40)):
        await until(lambda: app.overview is not None, "the first overview")
        await timed("open the jobs view", "j", showing(JobFilter()))
        await timed("next page (keyset)", "right_square_bracket", showing(JobFilter(), page=2))
        for line in (
            "state:failed",
            "queue:etl",
            "state:cancelled queue:etl",
            "scan-",
            "scan-0000042.png",
        ):
            await filtered(line)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tui", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs in the store")
    parser.add_argument("--store", type=Path, help="SQLite file (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store")
    args = parser.parse_args()
    path = args.store or Path(tempfile.mkdtemp(prefix="taskq-tui-bench-")) / "taskq.db"
    store = open_store(f"sqlite://{path}?synchronous=normal")
    try:
        print(f"store {path}")
        fill(store, args.jobs)
        results = asyncio.run(measure(store))
    finally:
        store.close()
        if args.store is None and not args.keep:
            # The folder is this run's own: the database and every file beside it go
            # (the WAL, its index, the commit mark the store's watchers read).
            shutil.rmtree(path.parent)
    slow = False
    for what, seconds in results:
        verdict = "ok" if seconds < GOAL_SECONDS else "SLOW"
        slow |= seconds >= GOAL_SECONDS
        print(f"{what:<45} {seconds * 1000:8.1f} ms  {verdict}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
