"""Building a worker: each of its roles made once, in the order they depend on each other.

Nothing is bound late: each role is given, when it is made, the roles it
calls. The heartbeat renews the maintenance leader's lease, so the
``Maintainer`` comes before it; the autoscaler tells the heartbeat of each
step; the reports' batches carry the claims (``ClaimRequests.send_reports``),
so the claims come before the batcher, and the claim loop, which waits while
reports are waiting, after it.
"""

from __future__ import annotations

import anyio

from taskq.broker.client.wake_sender import WakeSender
from taskq.broker.ops.maintenance import Maintainer
from taskq.broker.stores.store import Store
from taskq.broker.stores.wake_hints import HintedStore, hint_address
from taskq.worker.acks import AckBatcher
from taskq.worker.autoscale import Autoscaler
from taskq.worker.claim_requests import ClaimRequests
from taskq.worker.claimer import Claimer
from taskq.worker.completer import Completer
from taskq.worker.events import EventLog
from taskq.worker.executor import Executor
from taskq.worker.first_children import FirstChildren
from taskq.worker.heartbeat import Heartbeat, LeaseHolder
from taskq.worker.output_flusher import OutputFlusher
from taskq.worker.prefetch import Prefetch
from taskq.worker.publishing import Publisher
from taskq.worker.runtime import Worker, new_worker_id
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.settings import WorkerSettings
from taskq.worker.slot_sandboxes import SlotSandboxes
from taskq.worker.slots import Slots
from taskq.worker.spawn_names import SpawnNames
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import here_runner, look_runner, store_runner


def build_worker(
    store: Store,
    settings: WorkerSettings,
    children: FirstChildren,
    *,
    events: EventLog | None = None,
    worker_id: str | None = None,
    outage: StoreOutage | None = None,
    publisher: Publisher | None = None,
) -> Worker:
    """A worker for ``store``, ready to :meth:`~Worker.run`, that takes on ``children``.

    ``outage``: the one that opening the store told, so that an outage is told once.
    ``publisher``: the worker's declared jobs, written at start unless still pending.
    """
    events = events or EventLog()
    worker_id = worker_id or new_worker_id(settings)
    outage = outage or StoreOutage(events, worker_id)
    run = store_runner(store)
    draining = anyio.Event()
    slots = Slots(
        settings.min_slots, Prefetch(slots=settings.min_slots, most=settings.most_prefetch)
    )
    preparer = JobPreparer(policy=settings.policy, worker_max=settings.max_limits)
    deadline = children.deadline
    sandboxes = SlotSandboxes(settings, preparer, children.setup, children.take_pool())
    maintainer = (
        Maintainer(
            store,
            holder=worker_id,
            # Two heartbeats and a margin: a late one does not lose the lease.
            lease_seconds=max(10.0, 3 * settings.heartbeat_seconds),
            renewed_by_heartbeat=True,
            # Two heartbeats: the cut-off workers' first beat renews their leases,
            # and their reports retry at least every 2 s. A lease outlasts a
            # heartbeat interval, so no shorter outage lets a live worker's expire.
            after_outage_seconds=max(2 * settings.heartbeat_seconds, 4.0),
            long_outage_seconds=settings.heartbeat_seconds,
        )
        if settings.maintenance
        else None
    )
    holder = LeaseHolder(
        run=run, worker_id=worker_id, settings=settings, slots=slots, deadline=deadline
    )
    heartbeat = Heartbeat(
        holder, outage=outage, events=events, maintainer=maintainer, draining=draining
    )
    autoscaler = (
        Autoscaler(
            slots=slots,
            least=settings.min_slots,
            most=settings.max_slots,
            interval=settings.autoscale_interval_seconds,
            idle_seconds=settings.autoscale_idle_seconds,
            events=events,
            worker_id=worker_id,
            # The store's count of slots follows at once.
            on_change=heartbeat.beat_soon,
        )
        if settings.autoscale is not None
        else None
    )
    # On a cluster, jobs a report releases or spawns are hinted to idle workers as a
    # submit's are; the worker's own socket (opened here, registered at start) is skipped.
    hints = WakeSender(skip=hint_address(store)) if isinstance(store, HintedStore) else None
    claims = ClaimRequests(
        holder,
        heartbeat=heartbeat,
        draining=draining,
        hints=hints,
        look=look_runner(store, holding=lambda: bool(slots.held)),
        here=here_runner(store),
    )
    acks = AckBatcher(
        claims.send_reports,
        on_outage=outage.failed,
        still_running=slots.may_report,
        # Claiming ahead, a batch is worth sending once the jobs held will
        # last no longer than its round trip: the claim riding with it refills them.
        slack=slots.held_jobs_slack,
        # Drained, a batch waits a round trip more for the held jobs' reports.
        linger=slots.prefetch.linger,
    )
    completer = Completer(acks=acks, slots=slots, events=events)
    output = OutputFlusher(run, slots, outage, keep_bytes=settings.output_keep_bytes)
    executor = Executor(
        run,
        worker_id=worker_id,
        settings=settings,
        slots=slots,
        sandboxes=sandboxes,
        preparer=preparer,
        completer=completer,
        spawn_names=SpawnNames(run),
        output=output,
        autoscaler=autoscaler,
        events=events,
        draining=draining,
    )
    claimer = Claimer(
        store,
        settings=settings,
        slots=slots,
        claims=claims,
        acks=acks,
        outage=outage,
        draining=draining,
    )
    return Worker(
        store=store,
        run_op=run,
        settings=settings,
        worker_id=worker_id,
        events=events,
        outage=outage,
        draining=draining,
        stopped=anyio.Event(),
        slots=slots,
        sandboxes=sandboxes,
        cgroup_plan=children.cgroup_plan,
        deadline=deadline,
        start_turn=children.start_turn,
        heartbeat=heartbeat,
        maintainer=maintainer,
        autoscaler=autoscaler,
        acks=acks,
        claims=claims,
        executor=executor,
        claimer=claimer,
        publisher=publisher,
        output=output,
    )
