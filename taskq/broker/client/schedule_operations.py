"""The requests about schedules: add, list, remove, pause and resume (see :mod:`.operations`)."""

from __future__ import annotations

import builtins

from taskq.broker import schedule_timing
from taskq.broker.client import http_plans
from taskq.broker.client.client_base import ClientBase
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.faces import over_http
from taskq.broker.client.group_commit import GroupOp
from taskq.broker.client.lone_submit import check_alone
from taskq.broker.ops.plan import Op
from taskq.broker.ops.schedules import (
    Schedule,
    ScheduleAdded,
    schedule_add,
    schedule_list,
    schedule_remove,
    schedule_set_paused,
)
from taskq.broker.records import (
    JobSpec,
)


class ScheduleOperations(ClientBase):
    """The requests about schedules, each as the plan of its answer."""

    # -- schedules --------------------------------------------------------------------

    @over_http(http_plans.schedule_add)
    def add_schedule(
        self,
        name: str,
        job: JobSpec | NamedCall,
        *,
        cron: str | None = None,
        every_seconds: float | None = None,
        timezone: str = "UTC",
        catch_up: schedule_timing.CatchUp = schedule_timing.CatchUp.ONCE,
        replace: bool = False,
        unchecked: bool = False,
    ) -> GroupOp[ScheduleAdded]:
        """Submit ``job`` on every tick of ``cron`` (read in ``timezone``) or ``every_seconds``.

        A call by name (:class:`NamedCall`) is resolved now, as
        :meth:`declared_spec` does: every tick enqueues today's declared
        options. A built job is kept, its call checked. An undeclared name
        raises :class:`taskq.errors.UnknownFunction` unless ``unchecked``.
        A taken name is an error unless ``replace``, or unless the schedule
        stands exactly as given (a set-up script may run twice). Each tick submits the
        job alone: a call by name given ``run_anyway`` without ``after`` is refused,
        as a submit of it would be.
        """
        if isinstance(job, NamedCall):
            check_alone(job.options, job.target)

        def plan() -> Op[ScheduleAdded]:
            spec = yield from self.declarations.job_of(job, unchecked, self.submitter)
            added = yield from schedule_add(
                name,
                spec,
                cron=cron,
                every_seconds=every_seconds,
                timezone=timezone,
                catch_up=catch_up,
                replace=replace,
            )
            return added

        return plan()

    @over_http(http_plans.schedule_list)
    def schedules(self) -> GroupOp[builtins.list[Schedule]]:
        """Every schedule, by name, with its next fire time."""
        return schedule_list()

    @over_http(http_plans.schedule_remove)
    def remove_schedule(self, name: str) -> GroupOp[bool]:
        """Delete a schedule; False when there is none of that name."""
        return schedule_remove(name)

    @over_http(http_plans.schedule_pause)
    def pause_schedule(self, name: str) -> GroupOp[bool]:
        """Fire none of the schedule's ticks until resumed; False when there is none."""
        return schedule_set_paused(name, True)

    @over_http(http_plans.schedule_resume)
    def resume_schedule(self, name: str) -> GroupOp[bool]:
        """Fire the schedule's ticks again; False when there is none of that name."""
        return schedule_set_paused(name, False)
