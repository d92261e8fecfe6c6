"""taskq: a job queue that never loses a job, on embedded SQLite or a replicated rqlite."""

from taskq.broker.client import AsyncClient, AsyncJobHandle, Client, JobHandle, call_spec
from taskq.broker.records import Job, JobState

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncJobHandle",
    "Client",
    "Job",
    "JobHandle",
    "JobState",
    "__version__",
    "call_spec",
]
