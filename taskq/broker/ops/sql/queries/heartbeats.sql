-- Heartbeats and progress under a lease (taskq/broker/ops/heartbeats.py).

-- name: job_heartbeat
-- A job whose cancel was requested keeps its lease as it was (it is not
-- renewed) but is returned too, so that the worker can say why it stops it.
UPDATE jobs SET lease_until = CASE WHEN cancel_requested = 0
    THEN (SELECT now FROM taskq_clock) + :lease_seconds ELSE lease_until END
WHERE state = 'running' AND worker_id = :worker_id
    AND lease_token IN (SELECT value FROM json_each(:tokens))
RETURNING id, lease_token, lease_until, cancel_requested

-- name: worker_heartbeat
-- A worker marked lost (worker_mark_lost, in maintenance.sql, overwrites
-- 'draining' too) that is heard again is back: draining if it says it drains
-- (:draining = 1), else active.
UPDATE workers SET
    heartbeat_at = (SELECT now FROM taskq_clock),
    running = :running,
    slots = COALESCE(:slots, slots),
    state = CASE
        WHEN state <> 'lost' THEN state
        WHEN :draining = 1 THEN 'draining'
        ELSE 'active'
    END
WHERE id = :worker_id

-- name: job_progress
UPDATE jobs SET
    progress = :progress,
    progress_message = :message,
    checkpoint = COALESCE(:checkpoint, checkpoint)
WHERE id = :job_id AND lease_token = :lease_token AND state = 'running'
RETURNING id
