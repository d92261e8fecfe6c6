"""taskq: a job queue that never loses a job, on embedded SQLite or a replicated rqlite.

The public names, all reachable as ``taskq.NAME`` (docs/python-api.md shows them at work):

Declaring and submitting jobs
    ``job``              declare a module-level function a job, with its options
    ``DeclaredJob``      what ``@taskq.job`` makes: submit, submit_many, options, spec
    ``Client``           a blocking client over a store: submit, wait, look around, run the queues
    ``AsyncClient``      the same for async code
    ``set_default_client``, ``default_client``   the client declared jobs submit through
    ``JobHandle``, ``AsyncJobHandle``            a submitted job: ``status``, ``result``, ``cancel``
    ``JobQuery``         which jobs ``Client.list`` returns: state, queue, submitter, page...
    ``NamedCall``        a call of ``"pkg.mod:f"`` by name, resolved as declared (``add_schedule``)

Workflows (docs/workflows.md)
    ``Flow``             jobs to submit together, and what each runs after (``then``)
    ``step``, ``group``  a flow of one call; flows side by side (declared jobs: ``.step``, ``.map``)
    ``WorkflowHandle``, ``AsyncWorkflowHandle``  a submitted flow: ``jobs``, ``result``, ``wait``
    ``ParentResult``     a parent's outcome, read in a job (``current_job().parent_results()``)
    ``WorkflowInfo``     a workflow's jobs' counts per state, and its ``WorkflowStatus``

Jobs described by hand (the low-level form, for batches and schedules)
    ``call_spec``        a call of ``"pkg.module:function"``
    ``python_exec_spec`` source code and the name of the function in it to call
    ``shell_spec``       a command (``/bin/sh -c`` for a string, argv for a list)

Records and errors
    ``Job``, ``JobState``   a job as stored and its states
    ``OutputText``, ``OutputDropped``, ``AttemptEnded``   what ``Client.output`` yields
    ``errors``              every exception taskq raises (``JobFailed``, ``InvalidJob``...)

The client names are imported on first use: the sandbox's child processes
import ``taskq.worker`` and must not pay for the broker and HTTP client they never
use (start-up time and memory that counts against a job's limit).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from taskq import errors

__version__ = "0.1.0"

_EXPORTS = {
    "AsyncClient": "taskq.broker.client.client",
    "AsyncJobHandle": "taskq.broker.client.client",
    "Client": "taskq.broker.client.client",
    "JobHandle": "taskq.broker.client.client",
    "JobQuery": "taskq.broker.client.client",
    "NamedCall": "taskq.broker.client.client",
    "Flow": "taskq.broker.client.flows",
    "group": "taskq.broker.client.flows",
    "step": "taskq.broker.client.flows",
    "WorkflowHandle": "taskq.broker.client.client",
    "AsyncWorkflowHandle": "taskq.broker.client.client",
    "call_spec": "taskq.broker.client.client",
    "default_client": "taskq.broker.client.declared",
    "python_exec_spec": "taskq.broker.client.client",
    "set_default_client": "taskq.broker.client.declared",
    "shell_spec": "taskq.broker.client.client",
    "DeclaredJob": "taskq.broker.client.declared",
    "job": "taskq.broker.client.declared",
    "Job": "taskq.broker.records",
    "JobState": "taskq.broker.records",
    "ParentResult": "taskq.broker.records",
    "WorkflowInfo": "taskq.broker.records",
    "WorkflowStatus": "taskq.broker.records",
    "AttemptEnded": "taskq.broker.records",
    "OutputDropped": "taskq.broker.records",
    "OutputText": "taskq.broker.records",
    "Abort": "taskq.retry",
    "Retry": "taskq.retry",
    "RetryPolicy": "taskq.retry",
    "JobContext": "taskq.job_context",
    "current_job": "taskq.job_context",
}

__all__ = [
    "Abort",
    "AsyncClient",
    "AsyncJobHandle",
    "AsyncWorkflowHandle",
    "AttemptEnded",
    "Client",
    "DeclaredJob",
    "Flow",
    "Job",
    "JobContext",
    "JobHandle",
    "JobQuery",
    "JobState",
    "NamedCall",
    "OutputDropped",
    "OutputText",
    "ParentResult",
    "Retry",
    "RetryPolicy",
    "WorkflowHandle",
    "WorkflowInfo",
    "WorkflowStatus",
    "__version__",
    "call_spec",
    "current_job",
    "default_client",
    "errors",
    "group",
    "job",
    "python_exec_spec",
    "set_default_client",
    "shell_spec",
    "step",
]

if TYPE_CHECKING:
    from taskq.broker.client.client import (
        AsyncClient,
        AsyncJobHandle,
        AsyncWorkflowHandle,
        Client,
        JobHandle,
        JobQuery,
        NamedCall,
        WorkflowHandle,
        call_spec,
        python_exec_spec,
        shell_spec,
    )
    from taskq.broker.client.declared import DeclaredJob, default_client, job, set_default_client
    from taskq.broker.client.flows import Flow, group, step
    from taskq.broker.records import (
        AttemptEnded,
        Job,
        JobState,
        OutputDropped,
        OutputText,
        ParentResult,
        WorkflowInfo,
        WorkflowStatus,
    )
    from taskq.job_context import JobContext, current_job
    from taskq.retry import Abort, Retry, RetryPolicy


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'taskq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
