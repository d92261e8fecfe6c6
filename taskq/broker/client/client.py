"""The Python API: submit jobs, wait for results, look around, and run the queues.

``Client`` blocks; ``AsyncClient`` awaits. Every request but a submit is
declared once, with its plan, in :mod:`taskq.broker.client.operations`, and
each client reads it as a method of its own kind; the submits, which return
a handle of the client's kind (a job's or a workflow's: ids and the client,
every question a request of that client), are written for each, with its
handles: :mod:`.blocking_client` and :mod:`.async_client` (a unit test holds
the two clients' signatures equal). The ``taskq`` command and the console go
through these clients too, and import them from here, with the names they use
beside them.
"""

from __future__ import annotations

from taskq.broker.client.async_client import AsyncClient, AsyncJobHandle, AsyncWorkflowHandle
from taskq.broker.client.blocking_client import Client, JobHandle, WorkflowHandle
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.flows import Flow, group, step
from taskq.broker.client.job_query import JobQuery
from taskq.broker.client.retry_result import RetryResult
from taskq.broker.client.specs import (
    JobRef,
    call_spec,
    default_submitter,
    python_exec_spec,
    shell_spec,
    validate_spec,
)
from taskq.broker.ops.functions import DeclaredFunction
from taskq.broker.ops.jobs import CancelResult, ExecutionStats, Histogram, ThroughputBucket
from taskq.broker.ops.queues import KEEP, Keep, SubmitLimit
from taskq.broker.ops.schedules import Schedule, ScheduleAdded

__all__ = [
    "KEEP",
    "AsyncClient",
    "AsyncJobHandle",
    "AsyncWorkflowHandle",
    "CancelResult",
    "Client",
    "DeclaredFunction",
    "ExecutionStats",
    "Flow",
    "Histogram",
    "JobHandle",
    "JobQuery",
    "JobRef",
    "Keep",
    "NamedCall",
    "RetryResult",
    "Schedule",
    "ScheduleAdded",
    "SubmitLimit",
    "ThroughputBucket",
    "WorkflowHandle",
    "call_spec",
    "default_submitter",
    "group",
    "python_exec_spec",
    "shell_spec",
    "step",
    "validate_spec",
]
