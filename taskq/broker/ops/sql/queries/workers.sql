-- Registered workers (taskq/broker/ops/workers.py).

-- name: worker_register
-- wake_address: where the worker hears wake-up hints (taskq/broker/stores/wake_hints.py), or NULL.
-- policy: what it may run (taskq/broker/worker_policy.py), as JSON.
INSERT INTO workers (
    id, name, host, pid, queues, labels, slots, max_slots, running, state, started_at,
    heartbeat_at, wake_address, policy
)
VALUES (
    :worker_id, :name, :host, :pid, :queues, :labels, :slots, :max_slots, 0, 'active',
    (SELECT now FROM taskq_clock), (SELECT now FROM taskq_clock), :wake_address, :policy
)
ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    labels = excluded.labels, slots = excluded.slots, max_slots = excluded.max_slots,
    wake_address = excluded.wake_address, policy = excluded.policy, running = 0,
    state = 'active', started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at

-- A worker sets itself draining or stopped; the write is a sign of life, so it
-- counts as a heartbeat, and a worker marked lost that writes is back. A
-- stopped worker stays stopped: a drain's write retried after its answer was
-- lost, landing after the worker left, must not make it live again.
-- name: worker_set_state
UPDATE workers SET state = :state, heartbeat_at = (SELECT now FROM taskq_clock)
WHERE id = :worker_id AND (state <> 'stopped' OR :state = 'stopped')

-- name: worker_list
-- A stopped worker runs nothing, and a lost one is not known to: whatever
-- either last reported, it has no busy slots (a lost worker's jobs go back to
-- their queues when their leases run out; its next heartbeat reports again).
-- policy: NULL for a worker of a taskq that recorded none.
SELECT
    id, name, host, pid, queues, labels, slots, max_slots,
    CASE WHEN state IN ('stopped', 'lost') THEN 0 ELSE running END AS running,
    state, started_at, heartbeat_at, policy
FROM workers
ORDER BY name, id

-- The workers other than :worker_id that could claim job :job_id now, when
-- their policy lets them run it: live (active, its last heartbeat at most
-- :live_seconds old on the store's clock), taking jobs from :queue, with
-- every label the job needs. Each with its policy (NULL: a worker of a taskq
-- that recorded none) and whether it declares :name (@taskq.job), which is
-- what tells for such a worker.
-- name: worker_policies_for_job
SELECT
    w.policy,
    EXISTS (
        SELECT 1 FROM function_servers AS s WHERE s.worker_id = w.id AND s.name = :name
    ) AS declares
FROM workers AS w
WHERE w.id <> :worker_id AND w.state = 'active'
    AND w.heartbeat_at >= (SELECT now FROM taskq_clock) - :live_seconds
    AND EXISTS (SELECT 1 FROM json_each(w.queues) AS q WHERE q.value = :queue)
    AND NOT EXISTS (
        SELECT 1 FROM jobs AS j, json_each(j.labels) AS needed
        WHERE j.id = :job_id AND needed.value NOT IN (SELECT value FROM json_each(w.labels))
    )
