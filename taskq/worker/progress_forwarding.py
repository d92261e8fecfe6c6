"""Forwarding a running job's progress to the store: its latest report, a few times a second.

A job may report progress thousands of times a second; the store needs only
the latest now and then. The first report of a job starts a task for it,
which sends the newest update, waits, and ends when the job does. What the
job said after the last send goes with its report (see ``reports.report_of``).
"""

from __future__ import annotations

import logging

import anyio

from taskq import errors
from taskq.broker.ops.heartbeats import job_progress
from taskq.broker.records import Fenced
from taskq.worker.running import RunningJob, StopReason
from taskq.worker.store_runner import Run

log = logging.getLogger("taskq.worker")

_INTERVAL_SECONDS = 0.25


async def forward_progress(running: RunningJob, run: Run) -> None:
    """Send ``running``'s latest progress with ``run`` until the job is over.

    A lease the store says is lost stops the job, as a heartbeat would. A
    checkpoint is sent when it changed, not with every progress report.
    """
    sent_checkpoint: str | None = None
    while True:
        assert running.progress_changed is not None, "set up by the job's first report"
        await running.progress_changed.wait()
        running.progress_changed = anyio.Event()
        if running.ended:
            return
        update = running.progress
        assert update is not None, "set before the event"
        checkpoint = update.checkpoint_json
        fresh = None if checkpoint == sent_checkpoint else checkpoint
        try:
            verdict = await run(
                job_progress(
                    running.job.lease, update.fraction, update.message, checkpoint_json=fresh
                )
            )
        except errors.StoreError:
            pass  # an outage, told once (StoreOutage) by the heartbeats that meet it too
        except errors.InvalidJob as exc:
            log.warning("progress of job %s not recorded: %s", running.job.lease.job_id, exc)
        else:
            sent_checkpoint = checkpoint
            if verdict is Fenced.LEASE_LOST:
                running.stop(StopReason.LEASE_GONE)
        await anyio.sleep(_INTERVAL_SECONDS)
