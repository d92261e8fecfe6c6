"""The keeper's word to the worker: why it ended a job, whatever the worker had sent it."""

from __future__ import annotations

import os
import signal
import time

from taskq.broker.limits import Limits
from taskq.worker import keeper
from taskq.worker.child_process import ChildProcess, ChildSetup
from taskq.worker.job_environment import job_environment
from taskq.worker.lease_deadline import LeaseDeadline


def test_a_keeper_past_its_deadline_says_so_even_with_deadlines_unread() -> None:
    # Deadlines the keeper had not read when its own passed: closing its socket
    # with them unread would reset the worker's end and lose the reason.
    deadline = LeaseDeadline(lease_seconds=3, margin_seconds=1)
    deadline.held_since(time.monotonic() - 100)
    setup = ChildSetup(env=job_environment(os.environ), deadline=deadline)
    child = ChildProcess.spawn("pool", setup, ceiling=Limits()).result()
    try:
        for _ in range(50):
            child.set_deadline(deadline.kill_by)
        ended = child.reap()
        assert child.ended_by_keeper() == keeper.LEASE_ENDED
        assert ended.signal == signal.SIGKILL
    finally:
        child.close()


def test_a_keeper_asked_to_stop_gives_no_reason_of_its_own() -> None:
    child = ChildProcess.spawn("pool", ChildSetup(env=job_environment(os.environ))).result()
    try:
        child.kill_job()
        ended = child.reap()
        assert child.ended_by_keeper() == b""
        assert ended.signal == signal.SIGKILL
    finally:
        child.close()
