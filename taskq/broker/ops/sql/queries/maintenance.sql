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
            - (SELECT min(coalesce(succeeded_seconds, 1e308), coalesce(failed_seconds, 1e308))
               FROM retention)
            AND finished_at < COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
            - (SELECT CASE WHEN jobs.state = 'succeeded' THEN succeeded_seconds
                      ELSE failed_seconds END
               FROM retention)
    ) AS prunable_jobs,
    EXISTS (
        SELECT 1 FROM workers WHERE state IN ('stopped', 'lost')
            AND heartbeat_at < COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
                - (SELECT max(succeeded_seconds, failed_seconds) FROM retention)
    ) AS prunable_workers

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
    -- Queued again, it names no holder (the rule above job_complete in leases.sql);
    -- dead or cancelled, it keeps its last attempt's worker and times.
    worker_id = CASE WHEN cancel_requested = 1 OR attempts >= max_attempts THEN worker_id END,
    claimed_at = CASE WHEN cancel_requested = 1 OR attempts >= max_attempts THEN claimed_at END,
    started_at = CASE WHEN cancel_requested = 1 OR attempts >= max_attempts THEN started_at END,
    lease_until = NULL,
    -- The old holder's token goes: a report of its whose answer was lost must
    -- not read this requeue as its own report having landed.
    lease_token = NULL,
    -- Names the worker whose lease ran out: SET reads the row as it was.
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
-- a child that has not succeeded: one that has not finished has yet to read
-- its result, and one that ended failed, dead or cancelled may be retried (by
-- hand, or by a retry of the parent whose end cancelled it) and read it then.
-- Such a child is pruned in its own time, and its parents after it.
-- The retention is :retention_seconds for every job when given (a prune by
-- hand), else the store's for the job's end (retention.sql; NULL: kept).
-- The first bound, the shorter of the two, is the range on jobs_finished.
SELECT id FROM jobs
WHERE finished_at < (SELECT now FROM taskq_clock) - (
        SELECT coalesce(
            :retention_seconds,
            min(coalesce(succeeded_seconds, 1e308), coalesce(failed_seconds, 1e308))
        )
        FROM retention
    )
    AND finished_at < (SELECT now FROM taskq_clock) - (
        SELECT coalesce(
            :retention_seconds,
            CASE WHEN jobs.state = 'succeeded' THEN succeeded_seconds ELSE failed_seconds END
        )
        FROM retention
    )
    AND state IN ('succeeded', 'failed', 'dead', 'cancelled')
    AND NOT EXISTS (
        SELECT 1 FROM job_parents AS edge JOIN jobs AS child ON child.id = edge.child_id
        WHERE edge.parent_id = jobs.id AND child.state <> 'succeeded'
    )
ORDER BY finished_at, id
LIMIT :limit

-- name: schedule_fires_prune
-- The records of ticks whose jobs are gone at their retention: a schedule has
-- long moved past such a tick, so no scheduler will try it again, and the
-- record of each tick of a frequent schedule would otherwise be kept for ever.
DELETE FROM schedule_fires WHERE job_id IS NOT NULL AND job_id NOT IN (SELECT id FROM jobs)

-- name: worker_prune
-- Gone workers, kept as long as the longer of the store's two retentions
-- (none is pruned while either keeps its jobs for ever), or :retention_seconds.
DELETE FROM workers
WHERE state IN ('stopped', 'lost')
    AND heartbeat_at < (SELECT now FROM taskq_clock) - (
        SELECT coalesce(:retention_seconds, max(succeeded_seconds, failed_seconds))
        FROM retention
    )
RETURNING id
