"""Running a worker whose settings are checked: the store opened, the loop run, signals heard.

Kept apart from ``main`` (argument parsing, settings, the module check) so that
the check's child Python runs while this module's imports (the event loop, the
store drivers, the worker's loop) load: both are on the way to the first job.
"""

from __future__ import annotations

import gc
import signal
import sys
import time
from collections.abc import Sequence

import anyio

# What starting the event loop imports (anyio's asyncio backend, and uvloop,
# which serve asks for), imported with this module, while the first pool
# child starts (see ``main``), rather than by ``anyio.run`` once that child
# is ready: on 2 cores the loop's start took 13.5 ms after the child's
# module check, and now takes 0.6 ms.
import anyio._backends._asyncio
import uvloop  # noqa: F401

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations
from taskq.broker.ops.functions import Declaration
from taskq.broker.stores.store import Store
from taskq.broker.stores.store_url import SqliteTarget, parse_store_url
from taskq.worker import publishing, suspend
from taskq.worker.events import EventLog
from taskq.worker.factory import build_worker
from taskq.worker.first_children import FirstChildren
from taskq.worker.runtime import Worker, new_worker_id
from taskq.worker.settings import WorkerSettings
from taskq.worker.store_outage import StoreOutage

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG = 2


async def _serve(worker: Worker, store: Store) -> None:
    async with anyio.create_task_group() as tasks:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    if worker.draining.is_set():
                        worker.stop_now()
                    else:
                        worker.drain()

        tasks.start_soon(watch_signals)
        tasks.start_soon(suspend.stop_between_writes_on_sigtstp, store)
        await worker.run()
        tasks.cancel_scope.cancel()


def open_at_once(store_url: str) -> Store | None:
    """The store, opened while the first pool child imports the worker's modules; None
    when opening would write anything (a new SQLite file) or it cannot be had at once
    (away, wrongly named), for :func:`serve` to open, waiting out an outage or saying
    what is wrong.

    Both are on the way to the first job: the worker waited 13 ms for the child's
    module check and then took 3 ms to open the store (2 cores, stamped). Its schema
    is left to :func:`serve`, after the check: a worker whose modules do not import
    stops at once and changes nothing in the store, as before.
    """
    try:
        target = parse_store_url(store_url)
        if isinstance(target, SqliteTarget) and not target.path.exists():
            return None
        return open_store(store_url, migrate=False)
    except errors.TaskqError:
        return None


def serve(
    store_url: str | None,
    settings: WorkerSettings,
    children: FirstChildren,
    *,
    log_format: str,
    declarations: Sequence[Declaration] = (),
    opened: Store | None = None,
) -> int:
    """Run a worker on ``store_url`` until it is drained; the process's exit status.

    ``declarations``: the declared jobs of its modules, published before it registers
    (and again later, should the store fail then). ``children``: those started
    with it, which the worker takes on (or stops, should it not get that far).
    ``opened``: the store, if :func:`open_at_once` had it; :func:`serve` owns it, and
    brings its schema up to date.
    """
    _tune_garbage_collection()
    events = EventLog(format=log_format)
    events.take_log_records()
    worker_id = new_worker_id(settings)
    outage = StoreOutage(events, worker_id)
    try:
        store = _open_when_there_is_room(
            store_url, outage, settings.idle_poll_seconds, events, opened=opened
        )
    except BaseException as exc:
        children.close()
        if isinstance(exc, errors.ConfigError):
            print(f"taskq-worker: error: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        if isinstance(exc, errors.TaskqError):
            print(f"taskq-worker: error: cannot use the store: {exc}", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(exc, KeyboardInterrupt):
            return EXIT_OK  # stopped while waiting for space: nothing had started
        raise
    publisher = publishing.Publisher(worker_id, declarations, events)
    publisher.publish(store)
    failure: errors.StoreError | None = None
    try:
        # uvloop: the loop's own work per job (callbacks, timers, fd watches)
        # costs a fraction of asyncio's, and a busy worker's main thread is
        # mostly that work.
        try:
            anyio.run(
                _serve,
                build_worker(
                    store,
                    settings,
                    children,
                    events=events,
                    worker_id=worker_id,
                    outage=outage,
                    publisher=publisher,
                ),
                store,
                backend_options={"use_uvloop": True},
            )
        finally:
            events.flush()  # the last lines, should the loop have ended before writing them
    except* errors.StoreError as group:
        # The worker's task groups wrap what stopped it (registering at
        # start-up, say, on a damaged file); the person wants the error itself.
        failure = _first_leaf(group)
    finally:
        store.close()
    if failure is not None:
        print(f"taskq-worker: error: cannot use the store: {failure}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _open_when_there_is_room(
    url: str | None,
    outage: StoreOutage,
    pause: float,
    events: EventLog,
    *,
    opened: Store | None = None,
) -> Store:
    """The store at ``url`` (``opened`` already, if given), its schema brought up to
    date; an outage is waited out.

    A full disk, or a cluster without a leader (a quorum lost, an election
    under way): told once, as any outage is (``outage`` tells its end once
    the worker has registered), and the worker starts working once the store
    is back, as a running one carries on. Where nothing listens at any of the
    store's addresses (a wrong URL, a cluster not started), the worker that
    never reached it stops at once, saying so, rather than wait unheard. The
    migrations it applies are logged (``store_migrated``): an operator
    upgrading a fleet sees which worker moved the schema, and when.
    """
    while True:
        try:
            store = opened if opened is not None else open_store(url, migrate=False)
            opened = None
            try:
                applied = migrations.migrate(store)
            except BaseException:
                store.close()
                raise
            if applied:
                first, last = applied[0], applied[-1]
                events.emit(
                    "store_migrated",
                    schema=last,
                    applied=str(first) if first == last else f"{first}-{last}",
                )
            return store
        except errors.StoreUnreachable:
            raise
        except errors.StoreUnavailable as exc:
            outage.failed(exc)
            time.sleep(pause)


def _first_leaf(group: BaseExceptionGroup[errors.StoreError]) -> errors.StoreError:
    """The first exception in ``group``, however deeply groups nest."""
    first = group.exceptions[0]
    return first if not isinstance(first, BaseExceptionGroup) else _first_leaf(first)


def _tune_garbage_collection() -> None:
    """Collect cyclic garbage less often than Python's default, which suits small scripts.

    A busy worker allocates a few hundred objects per job, so the default
    (a young-generation pass every 700 allocations) ran every few jobs and
    cost 5-15% of the embedded drain's throughput. Everything imported
    so far lives as long as the process: frozen, later passes skip it.
    Collection was off while the worker started (``main``): on again.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    gc.enable()
