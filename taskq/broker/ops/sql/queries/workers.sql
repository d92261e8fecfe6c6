-- Registered workers (taskq/broker/ops/workers.py).

-- name: worker_register
-- wake_address: where the worker hears wake-up hints (taskq/broker/stores/wake_hints.py), or NULL.
INSERT INTO workers (
    id, name, host, pid, queues, labels, slots, max_slots, running, state, started_at,
    heartbeat_at, wake_address
)
VALUES (
    :worker_id, :name, :host, :pid, :queues, :labels, :slots, :max_slots, 0, 'active',
    (SELECT now FROM taskq_clock), (SELECT now FROM taskq_clock), :wake_address
)
ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    labels = excluded.labels, slots = excluded.slots, max_slots = excluded.max_slots,
    wake_address = excluded.wake_address, running = 0, state = 'active',
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at

-- name: worker_set_state
UPDATE workers SET state = :state, heartbeat_at = (SELECT now FROM taskq_clock)
WHERE id = :worker_id

-- name: worker_list
-- A stopped worker runs nothing, and a lost one is not known to: whatever
-- either last reported, it has no busy slots (a lost worker's jobs go back to
-- their queues when their leases run out; its next heartbeat reports again).
SELECT
    id, name, host, pid, queues, labels, slots, max_slots,
    CASE WHEN state IN ('stopped', 'lost') THEN 0 ELSE running END AS running,
    state, started_at, heartbeat_at
FROM workers
ORDER BY name, id
