"""The leases a worker holds: which a heartbeat renewed, and which ran out before it could."""

from __future__ import annotations

from taskq.broker.records import ClaimedJob, Lease, PayloadKind
from taskq.worker.running import RunningJob, StopReason, note_renewals, stop_expired


def _held(job_id: int, renewed_at: float) -> RunningJob:
    lease = Lease(job_id, f"token-{job_id}")
    job = ClaimedJob(lease, PayloadKind.CALL, {}, "default", 1, 3, None, {}, 0.0)
    return RunningJob(job, renewed_at=renewed_at)


def test_a_heartbeat_renews_the_leases_it_carried_but_not_those_it_lost() -> None:
    held = {1: _held(1, 10.0), 2: _held(2, 10.0), 3: _held(3, 10.0)}
    carried = [held[1].job.lease, held[2].job.lease]
    note_renewals(held, carried, frozenset({held[2].job.lease}), sent_at=15.0)
    assert [held[n].renewed_at for n in (1, 2, 3)] == [15.0, 10.0, 10.0]
    # A lease of the same job but an older claim renews nothing.
    note_renewals(held, [Lease(3, "an-older-claim")], frozenset(), sent_at=20.0)
    assert held[3].renewed_at == 10.0


def test_jobs_not_renewed_in_time_are_stopped_and_the_rest_set_the_deadline() -> None:
    held = {1: _held(1, 100.0), 2: _held(2, 120.0), 3: _held(3, 125.0), 4: _held(4, 90.0)}
    held[4].reporting = True  # over already: its lease no longer counts
    oldest = stop_expired(held, lasts=28.0, now=130.0)
    assert held[1].stopped_because == StopReason.LEASE_GONE
    assert held[1].cancel.is_set()
    assert held[2].stopped_because is None
    assert held[4].stopped_because is None
    assert oldest == 120.0
    assert stop_expired({1: held[1]}, lasts=28.0, now=130.0) is None
