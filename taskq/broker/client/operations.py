"""Every request of a client but submit, declared once: its signature, its docstring, its plan.

Each method of :class:`Operations` is decorated with :class:`Operation` and
returns the plan of its request (or with :class:`Paged`, and returns its
pages). Read from a :class:`Blocking` client (
:class:`taskq.broker.client.client.Client`) it is a method that runs the plan
and returns its answer; from an :class:`Awaiting` one
(:class:`taskq.broker.client.client.AsyncClient`) a coroutine method that
awaits it (see :mod:`taskq.broker.client.faces`). So the two clients ask the
same, with the same parameters, by construction; they differ only in how
they wait.
"""

from __future__ import annotations

from taskq.broker.client.fleet_operations import FleetOperations
from taskq.broker.client.job_operations import JobOperations
from taskq.broker.client.job_query import JobQuery
from taskq.broker.client.schedule_operations import ScheduleOperations

__all__ = ["JobQuery", "Operations"]


class Operations(JobOperations, FleetOperations, ScheduleOperations):
    """The requests both clients make, each as the plan of its answer.

    Declared by group: jobs and workflows (:mod:`.job_operations`), queues,
    workers and the store (:mod:`.fleet_operations`), schedules
    (:mod:`.schedule_operations`).
    """
