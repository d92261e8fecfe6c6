-- The maintenance services (taskq/broker/ops/maintenance.py); the leader lease is in leader.sql.

-- name: maintenance_due
-- What the maintenance services would find to do, by the answering node's
-- clock (or :now): a read, so idle services write nothing.
SELECT
    EXISTS (
        SELECT 1 FROM jobs WHERE state = 'running'
            AND lease_until < COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
    ) AS expired_leases,
    EXISTS (
        SELECT 1 FROM workers WHERE state IN ('active', 'draining')
            AND heartbeat_at < COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
                - :grace_seconds
    ) AS lost_workers,
    EXISTS (
        SELECT 1 FROM jobs
        WHERE finished_at < COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
            - :retention_seconds
    ) AS prunable_jobs

-- name: execution_expire
UPDATE executions SET finished_at = (SELECT now FROM taskq_clock), outcome = 'lease_expired'
WHERE finished_at IS NULL AND lease_token IN (
    SELECT lease_token FROM jobs
    WHERE state = 'running' AND lease_until < (SELECT now FROM taskq_clock)
)

-- name: job_requeue_expired
UPDATE jobs SET
    state = CASE
        WHEN cancel_requested = 1 THEN 'cancelled'
        WHEN attempts >= max_attempts THEN 'dead'
        ELSE 'queued'
    END,
    finished_at = CASE
        WHEN cancel_requested = 1 OR attempts >= max_attempts THEN (SELECT now FROM taskq_clock)
    END,
    run_at = (SELECT now FROM taskq_clock),
    lease_until = NULL,
    -- The old holder's token goes: a report of its whose answer was lost must
    -- not read this requeue as its own report having landed.
    lease_token = NULL,
    error = json_object(
        'type', 'LeaseExpired',
        'message', 'the lease of worker ' || COALESCE(worker_id, '?') || ' expired'
    )
WHERE state = 'running' AND lease_until < (SELECT now FROM taskq_clock)
RETURNING id, state

-- name: worker_mark_lost
UPDATE workers SET state = 'lost'
WHERE state IN ('active', 'draining')
    AND heartbeat_at < (SELECT now FROM taskq_clock) - :grace_seconds
RETURNING id

-- name: output_prune
-- The output of a pruned job's attempts, which goes with them.
DELETE FROM job_output
WHERE execution_id IN (SELECT id FROM executions WHERE job_id IN ({job_prunable}))

-- name: execution_prune
DELETE FROM executions WHERE job_id IN ({job_prunable})

-- name: job_parents_prune
-- A pruned job's own dependencies; those naming it as a parent stay with
-- their children, which have finished, for as long as they are kept.
DELETE FROM job_parents WHERE child_id IN ({job_prunable})

-- name: workflow_prune
-- A workflow none of whose jobs outlives this prune.
DELETE FROM workflows
WHERE id IN (SELECT workflow_id FROM jobs WHERE id IN ({job_prunable}))
    AND NOT EXISTS (
        SELECT 1 FROM jobs AS kept
        WHERE kept.workflow_id = workflows.id AND kept.id NOT IN ({job_prunable})
    )

-- name: job_prune
DELETE FROM jobs WHERE id IN ({job_prunable})
RETURNING id

-- name: job_prunable
-- The jobs the prunes above delete, in place of their {job_prunable}:
-- finished before the retention, oldest first, at most :limit, and none with
-- a child that has not finished (the child has yet to read its result).
SELECT id FROM jobs
WHERE finished_at < (SELECT now FROM taskq_clock) - :retention_seconds
    AND state IN ('succeeded', 'failed', 'dead', 'cancelled')
    AND NOT EXISTS (
        SELECT 1 FROM job_parents AS edge JOIN jobs AS child ON child.id = edge.child_id
        WHERE edge.parent_id = jobs.id
            AND child.state NOT IN ('succeeded', 'failed', 'dead', 'cancelled')
    )
ORDER BY finished_at, id
LIMIT :limit

-- name: worker_prune
DELETE FROM workers
WHERE state IN ('stopped', 'lost')
    AND heartbeat_at < (SELECT now FROM taskq_clock) - :retention_seconds
RETURNING id
