"""The chaos run's faults: when each kind strikes (:class:`Fault`), and :class:`Chaos`.

:class:`Chaos` fires each kind of fault on its schedule and undoes it: a
worker SIGKILLed (and a new one started a little later), a worker
SIGSTOPped (and SIGCONTed after its lease and 3 s), the rqlite leader
SIGKILLed (and restarted), the cut-off worker's link cut (and healed).
Whatever it has not undone when the chaos ends, :meth:`Chaos.undo_all`
undoes. Its victims are workers of the run's :class:`chaos_fleet.Fleet`,
picked by what the run's watch thread last saw of the store: half of the
kills and stops go to a worker that runs a long job, when one does (all of
them with ``--quick``, where a fault waits up to 5 s for one and spares the
worker that runs maintenance when it can, but for the first fault, which
goes to a worker running a workflow's long parent).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

# How the tokens of workflows' long parents start (bench/chaos_workflows.py).
WORKFLOW_LONG_PREFIX = "Lw"

if TYPE_CHECKING:
    from bench.chaos_fleet import Fleet
    from bench.chaos_link import Partition
    from taskq.dev.cluster import RqliteCluster, RqliteNode


@dataclass(frozen=True)
class Fault:
    """When a fault strikes: about every ``every`` s (None: never), at most ``limit`` times."""

    every: float | None
    limit: int | None = None
    first: float = 0.0  # seconds after the workers start


# -- the chaos itself -----------------------------------------------------------------------


class Options(Protocol):
    """What the faults read of the run's options (``chaos.Options``)."""

    @property
    def quick(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def restart_after(self) -> float: ...
    @property
    def leader_down_seconds(self) -> float: ...
    @property
    def stop_seconds(self) -> float: ...
    @property
    def cut_seconds(self) -> float: ...
    @property
    def worker_kill(self) -> Fault: ...
    @property
    def stop(self) -> Fault: ...
    @property
    def leader_kill(self) -> Fault: ...
    @property
    def cut(self) -> Fault: ...


class Background(Protocol):
    """What the faults read of the watcher (``chaos_load.Background``): whom to spare or hit."""

    maintainer: str
    running: list[tuple[str, str]]


class Chaos:
    """Fires each kind of fault on its schedule and undoes it (restart, SIGCONT, heal) later."""

    def __init__(
        self,
        options: Options,
        fleet: Fleet,
        background: Background,
        cluster: RqliteCluster | None,
        partition: Partition | None,
        origin: float,
        say: Callable[[str], None],
    ) -> None:
        self.options = options
        self.origin = origin  # wall-clock time the run began: the ledger examples count from it
        self.fleet = fleet
        self.background = background
        self.cluster = cluster
        self.partition = partition
        self.say = say
        self.rng = random.Random(options.seed * 7919)
        self.start = time.monotonic()
        self.counts: Counter[str] = Counter()
        self.leader_kills: list[float] = []  # monotonic times of the kills
        # For each kill, when a surviving node first named a new leader (monotonic), or None.
        self.leaders_reported: list[float | None] = []
        self.log: list[str] = []
        self.undo: list[tuple[float, Callable[[], None]]] = []  # (when, what)
        self.cut_slot_busy = False
        self.overdue_since: dict[str, float] = {}
        self.insist = False  # whether a fault must wait for a worker running a long job
        self.parent_hit = False  # whether a fault has gone to a workflow's long parent
        o = options
        self.actions: dict[str, tuple[Fault, Callable[[], bool]]] = {
            "worker_kill": (o.worker_kill, self.kill_worker),
            "stop": (o.stop, self.stop_worker),
            "leader_kill": (o.leader_kill, self.kill_leader),
            "cut": (o.cut, self.cut),
        }
        self.due = {
            name: self.start + fault.first
            for name, (fault, _) in self.actions.items()
            if fault.every is not None
            and (name != "leader_kill" or cluster is not None)
            and (name != "cut" or partition is not None)
        }

    def note(self, message: str) -> None:
        at = time.time() - self.origin
        self.log.append(f"{at:7.2f} {message}")
        self.say(f"t={at:.2f} {message}")

    def later(self, delay: float, action: Callable[[], None]) -> None:
        self.undo.append((time.monotonic() + delay, action))

    @property
    def finished_firing(self) -> bool:
        """Every limited action has fired its count and nothing waits to be undone."""
        return not self.undo and all(
            fault.limit is None or self.counts[name] >= fault.limit
            for name, (fault, _) in self.actions.items()
            if name in self.due
        )

    def tick(self) -> None:
        now = time.monotonic()
        for entry in [entry for entry in self.undo if entry[0] <= now]:
            self.undo.remove(entry)
            entry[1]()
        for name, due in list(self.due.items()):
            fault, fire = self.actions[name]
            if due > now or fault.every is None:
                continue
            if fault.limit is not None and self.counts[name] >= fault.limit:
                del self.due[name]
                continue
            # With --quick a fault waits up to 5 s for a victim that runs a long job.
            since = self.overdue_since.setdefault(name, now)
            self.insist = self.options.quick and now - since < 5.0
            if fire():
                self.counts[name] += 1
                self.due[name] = now + fault.every * self.rng.uniform(0.7, 1.3)
                del self.overdue_since[name]
            else:
                self.due[name] = now + 0.5  # nothing to act on yet: try again soon
        self.fleet.restart_exited()

    def undo_all(self) -> None:
        for _, action in sorted(self.undo, key=lambda entry: entry[0]):
            action()
        self.undo.clear()

    def victim(self) -> int | None:
        """A worker to hit: one running a long job when there is one (see the module doc)."""
        now = time.monotonic()
        cut = {0} if self.cut_slot_busy else set()
        slots = [
            slot
            for slot, worker in enumerate(self.fleet.current)
            if worker is not None
            and worker.running
            and slot not in self.fleet.frozen | cut
            and now - self.fleet.born[slot] > 1.5
        ]
        maintainer = self.fleet.slot_named(self.background.maintainer)
        parents = [slot for slot in slots if slot in self.long_holders(WORKFLOW_LONG_PREFIX)]
        if self.options.quick and not self.parent_hit and parents:
            # The quick run's first fault goes to a workflow's long parent, on the
            # maintenance worker if no other holds one: whatever else its few
            # faults hit, a fan-in then waits for a parent to be claimed again.
            self.parent_hit = True
            return self.rng.choice([s for s in parents if s != maintainer] or parents)
        if self.options.quick:
            # Spare the maintenance worker, so that expired leases are requeued
            # at once and a job left running by the victim meets its re-run
            # within the short jobs of a quick run. (The full run spares none.)
            slots = [s for s in slots if s != maintainer] or slots
        if not slots:
            return None
        if self.options.quick or self.rng.random() < 0.5:
            preferred = [slot for slot in slots if slot in self.long_holders()]
            if preferred:
                return self.rng.choice(preferred)
            if self.insist:
                return None
        return self.rng.choice(slots)

    def long_holders(self, prefix: str = "L") -> set[int | None]:
        """The slots whose workers run a long job (its token starts with ``prefix``), as
        the store saw it last."""
        return {
            self.fleet.slot_named(name)
            for token, name in self.background.running
            if token.startswith(prefix)
        }

    def kill_worker(self) -> bool:
        slot = self.victim()
        if slot is None:
            return False
        tag = self.fleet.current[slot].tag  # type: ignore[union-attr]
        self.fleet.kill(slot)
        self.note(f"SIGKILL worker {tag}")

        def restart() -> None:
            self.note(f"started worker {self.fleet.start(slot).tag}")

        self.later(self.options.restart_after, restart)
        return True

    def stop_worker(self) -> bool:
        slot = self.victim()
        if slot is None:
            return False
        tag = self.fleet.current[slot].tag  # type: ignore[union-attr]
        self.fleet.freeze(slot)
        self.note(f"SIGSTOP worker {tag} for {self.options.stop_seconds:g} s")

        def thaw() -> None:
            self.fleet.thaw(slot)
            self.note(f"SIGCONT worker {tag}")

        self.later(self.options.stop_seconds, thaw)
        return True

    def kill_leader(self) -> bool:
        assert self.cluster is not None
        cluster = self.cluster
        if not all(node.alive for node in cluster.nodes):
            return False
        leader = cluster.leader()
        if leader is None:
            return False
        self.leader_kills.append(time.monotonic())
        cluster.kill_node(leader, signal.SIGKILL)
        self.note(f"SIGKILL rqlite leader {leader.node_id}")
        kill = len(self.leaders_reported)
        self.leaders_reported.append(None)

        def reported(at: float) -> None:
            self.leaders_reported[kill] = at

        threading.Thread(
            target=watch_election, args=(cluster, leader, reported), daemon=True
        ).start()

        def restart() -> None:
            cluster.start_node(leader)
            self.note(f"restarted rqlite {leader.node_id}")

        self.later(self.options.leader_down_seconds, restart)
        return True

    def cut(self) -> bool:
        assert self.partition is not None
        partition = self.partition
        worker = self.fleet.current[0]
        if worker is None or 0 in self.fleet.frozen or not worker.running:
            return False
        if time.monotonic() - self.fleet.born[0] < 3:  # let it start: it would only exit
            return False
        if self.insist and 0 not in self.long_holders():
            return False
        partition.cut()
        self.cut_slot_busy = True
        self.note(f"cut worker {worker.tag} off the store for {self.options.cut_seconds:g} s")

        def heal() -> None:
            partition.heal()
            self.cut_slot_busy = False
            self.note("healed the cut")

        self.later(self.options.cut_seconds, heal)
        return True


ELECTION_POLL_SECONDS = 0.02
ELECTION_WATCH_SECONDS = 15.0


def watch_election(
    cluster: RqliteCluster, killed: RqliteNode, reported: Callable[[float], None]
) -> None:
    """Tell ``reported`` when a surviving node first names a leader other than ``killed``.

    Each node's own ``/status``, every 20 ms: the moment the cluster could
    take writes again, set beside the first write a client got through.
    Until their election timeout the survivors still name the dead leader,
    so only another name counts.
    """
    deadline = time.monotonic() + ELECTION_WATCH_SECONDS
    while time.monotonic() < deadline:
        for node in cluster.nodes:
            if node is killed or not node.alive:
                continue
            view = cluster.raft_view(node)
            if view is not None and view[1] and view[1] != killed.node_id:
                reported(time.monotonic())
                return
        time.sleep(ELECTION_POLL_SECONDS)
