-- Jobs and their attempts by hand: cancel, retry, reads (taskq/broker/ops/jobs.py).

-- name: job_cancel_queued
-- Queued and waiting jobs end at once; the jobs waiting on them are cancelled
-- by the settling statements after it (dependencies.sql), as for any end.
-- {chosen} names the jobs: job_cancel_chosen_ids, or a workflow's (workflows.sql).
-- Its error says why, for a run_anyway child to read, unless it keeps its last
-- attempt's (a job cancelled while queued for a retry: what that attempt met).
UPDATE jobs SET state = 'cancelled', finished_at = (SELECT now FROM taskq_clock),
    error = COALESCE(
        error, json_object('type', 'Cancelled', 'message', 'cancelled by request while ' || state)
    )
WHERE {chosen} AND state IN ('queued', 'waiting')
RETURNING id

-- name: job_cancel_running
UPDATE jobs SET cancel_requested = 1
WHERE {chosen} AND state = 'running'
RETURNING id

-- name: job_cancel_chosen_ids
id IN (SELECT value FROM json_each(:ids))

-- name: job_retry
-- A job with parents waits for them again (those that ended stay ended):
-- its counters are made anew after it, as a revived job's are (dependencies.sql).
UPDATE jobs SET
    state = CASE WHEN parent_count > 0 THEN 'waiting' ELSE 'queued' END,
    run_at = (SELECT now FROM taskq_clock),
    max_attempts = MAX(max_attempts, attempts + 1),
    finished_at = NULL,
    cancel_requested = 0,
    lease_until = NULL,
    -- Open again, it names no holder (the rule above job_complete in leases.sql).
    worker_id = NULL,
    claimed_at = NULL,
    started_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN ('failed', 'dead', 'cancelled')
RETURNING id

-- name: job_retry_guard
-- Last in a retry by hand, after the settling: a job retried that the settling
-- cancelled again at once (a parent ended failed, dead or cancelled, and the
-- retry did not bring it back) makes parent_id NULL here, which fails the
-- whole write, so nothing moves; job_retry_blocker then reads why. The
-- cascade names the parent in cancelled_by, which a cancel by hand leaves NULL.
INSERT INTO job_parents (child_id, position, parent_id)
SELECT id, -1, NULL FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids))
    AND state = 'cancelled' AND cancelled_by IS NOT NULL

-- name: job_retry_blocker
-- Of the jobs a retry by hand names (:ids, in order), the first that waits for a
-- parent which ended without succeeding and is not among them; the cause its
-- parent's error names, if a cascade cancelled that parent too.
SELECT job.id, job.workflow_id, parent.id AS parent_id, parent.state AS parent_state,
    CASE WHEN json_valid(parent.error) THEN parent.error ->> '$.cause' END AS cause,
    CASE WHEN json_valid(parent.error) THEN parent.error ->> '$.cause_state' END AS cause_state
FROM json_each(:ids) AS given
JOIN jobs AS job ON job.id = given.value
JOIN job_parents AS edge ON edge.child_id = job.id
JOIN jobs AS parent ON parent.id = edge.parent_id
WHERE job.run_anyway = 0
    AND parent.state IN ('failed', 'dead', 'cancelled')
    AND parent.id NOT IN (SELECT value FROM json_each(:ids))
ORDER BY given.key, edge.position
LIMIT 1

-- name: job_first_unknown
-- The position in :ids of the first id no job has: cancel and retry refuse the lot for it.
SELECT given.key AS position FROM json_each(:ids) AS given
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = given.value)
ORDER BY given.key
LIMIT 1

-- name: job_get
SELECT * FROM jobs WHERE id = :id

-- name: job_list
SELECT * FROM jobs
WHERE id < :before
    AND (:queue IS NULL OR queue = :queue)
    AND (:submitter IS NULL OR submitter = :submitter)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: job_list_by_state
-- The index's own condition, repeated, is what lets SQLite use a partial index
-- for a state given as a parameter.
SELECT * FROM jobs
WHERE state = :state AND state NOT IN ('running', 'succeeded') AND id < :before
    AND (:queue IS NULL OR queue = :queue)
    AND (:submitter IS NULL OR submitter = :submitter)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: job_list_running
-- Running jobs are few (the slots of live workers): read them all by their
-- index and sort, rather than walk the table by id for them.
SELECT * FROM jobs INDEXED BY jobs_running_worker
WHERE state = 'running' AND id < :before
    AND (:queue IS NULL OR queue = :queue)
    AND (:submitter IS NULL OR submitter = :submitter)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: job_list_succeeded
SELECT * FROM jobs
WHERE state = 'succeeded' AND id < :before
    AND (:queue IS NULL OR queue = :queue)
    AND (:submitter IS NULL OR submitter = :submitter)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: job_list_by_worker
-- :worker_id is a worker's id, or its name (taskq workers shows both), which
-- stands for every worker of that name the store still has.
SELECT * FROM jobs
WHERE id IN (
        SELECT job_id FROM executions WHERE worker_id IN (
            SELECT :worker_id UNION SELECT id FROM workers WHERE name = :worker_id
        )
    )
    AND id < :before
    AND (:state IS NULL OR state = :state)
    AND (:queue IS NULL OR queue = :queue)
    AND (:submitter IS NULL OR submitter = :submitter)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: job_list_by_workflow
SELECT * FROM jobs
WHERE workflow_id = :workflow_id AND id < :before
    AND (:state IS NULL OR state = :state)
    AND (:queue IS NULL OR queue = :queue)
    AND (:submitter IS NULL OR submitter = :submitter)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: job_list_by_submitter
SELECT * FROM jobs
WHERE submitter = :submitter AND id < :before
    AND (:state IS NULL OR state = :state)
    AND (:queue IS NULL OR queue = :queue)
    AND (:text IS NULL OR instr(payload, :text) > 0 OR queue = :text)
ORDER BY id DESC LIMIT :limit

-- name: execution_throughput
-- Attempts finished per minute and outcome over the last :minutes minutes,
-- by :now or else the answering node's clock (a read: nothing is replicated).
SELECT
    CAST((COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0) - finished_at) / 60 AS INTEGER) AS minutes_ago,
    outcome,
    count(*) AS n
FROM executions
WHERE finished_at >= COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0) - :minutes * 60
GROUP BY minutes_ago, outcome

-- name: execution_list_by_job
SELECT *, {output_tail} FROM executions WHERE job_id = :job_id ORDER BY id

-- name: execution_list_by_worker
-- A page of the worker's attempts, newest first. A page with none is one row
-- with no id if the worker is known (it has a row, or attempts: a pruned
-- worker's outlive its row), and no row at all if not: one read tells an
-- empty page from an id no worker ever had.
SELECT page.* FROM (SELECT 1) AS asked
LEFT JOIN (
    SELECT *, {output_tail} FROM executions
    WHERE worker_id = :worker_id AND id < :before
    ORDER BY id DESC LIMIT :limit
) AS page ON TRUE
WHERE page.id IS NOT NULL
    OR EXISTS (SELECT 1 FROM workers WHERE id = :worker_id)
    OR EXISTS (SELECT 1 FROM executions WHERE worker_id = :worker_id)
ORDER BY page.id DESC

-- name: execution_output_tail
-- An attempt's log tail, in place of {output_tail}: its output stored inline
-- (shorter than any tail), or else the chunks of its stored output
-- (ops/output.py) that hold its last :tail_bytes (a chunk is at most
-- :most_chunk_bytes long), the reader trimming the first. The same record a
-- follower reads, not a copy of it.
COALESCE(
    executions.output_inline,
    (
        SELECT group_concat(data, '') FROM (
            SELECT data FROM job_output
            WHERE execution_id = executions.id
                AND at_byte > executions.output_bytes - :tail_bytes - :most_chunk_bytes
                AND at_byte + size > executions.output_bytes - :tail_bytes
            ORDER BY at_byte
        )
    )
) AS output_tail

-- name: execution_seconds_histogram
-- Finished attempts' run time by outcome (kind 'run'), and started jobs' pickup
-- latency, how long their latest attempt waited once due (kind 'pickup'):
-- counts per bucket (its upper bound in seconds, NULL past the last) and the
-- seconds summed. The store's own totals, so that every server scraping it
-- reports the same numbers. The bounds are ATTEMPT_SECONDS_BUCKETS in ops/jobs.py.
SELECT kind, outcome, bucket, count(*) AS n, sum(max(seconds, 0)) AS seconds FROM (
    SELECT
        kind, outcome, seconds,
        CASE
            WHEN seconds <= 0.01 THEN 0.01
            WHEN seconds <= 0.05 THEN 0.05
            WHEN seconds <= 0.1 THEN 0.1
            WHEN seconds <= 0.5 THEN 0.5
            WHEN seconds <= 1 THEN 1.0
            WHEN seconds <= 5 THEN 5.0
            WHEN seconds <= 30 THEN 30.0
            WHEN seconds <= 120 THEN 120.0
            WHEN seconds <= 600 THEN 600.0
        END AS bucket
    FROM (
        SELECT 'run' AS kind, coalesce(outcome, '?') AS outcome, finished_at - started_at AS seconds
        FROM executions WHERE finished_at IS NOT NULL
        UNION ALL
        SELECT 'pickup', '', started_at - run_at FROM jobs WHERE started_at IS NOT NULL
    )
)
GROUP BY kind, outcome, bucket

-- name: job_next_run_at
SELECT MIN(run_at) AS run_at FROM jobs WHERE state = 'queued'
