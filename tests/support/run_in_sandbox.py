"""``python -m tests.support.run_in_sandbox ISOLATION TARGET ARGS LIMITS``: one job, its outcome.

Runs a ``tests.support.jobs`` function in a sandbox of its own (``pool`` or
``process``) and prints the outcome's status and result as JSON: a test
starts it as another user to see the sandbox as a worker not run by root.
"""

from __future__ import annotations

import json
import sys

import anyio

from taskq.broker.limits import parse_limits
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox


async def _run(isolation: str, target: str, args: list[object], limits: dict[str, object]) -> None:
    preparer = JobPreparer(policy=Policy(modules=("tests.support",)))
    sandbox = PoolSandbox(preparer=preparer) if isolation == "pool" else Sandbox(preparer=preparer)
    async with sandbox:
        payload = CallPayload(f"tests.support.jobs:{target}", args)
        outcome = await sandbox.run(payload, parse_limits(limits))
    print(json.dumps({"status": outcome.status.value, "result": outcome.result}))


if __name__ == "__main__":
    isolation, target, args, limits = sys.argv[1:]
    anyio.run(_run, isolation, target, json.loads(args), json.loads(limits))
