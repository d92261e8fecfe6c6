-- Claims, heartbeats and reports under a lease (taskq/broker/ops/leases.py).

-- name: job_claim
-- {candidates} is one job_claim_candidates branch per queue of the worker:
-- each reads its queue's claim index in order and stops after :limit rows,
-- so a claim costs the same with a million queued jobs as with a thousand.
UPDATE jobs SET
    state = 'running',
    attempts = attempts + 1,
    worker_id = :worker_id,
    lease_token = :claim_token || '.' || id,
    lease_until = (SELECT now FROM taskq_clock) + :lease_seconds,
    claimed_at = (SELECT now FROM taskq_clock),
    -- Until its attempt reports when its code started, a job counts as started at its claim.
    started_at = (SELECT now FROM taskq_clock),
    cancel_requested = 0,
    progress = NULL,
    progress_message = NULL
WHERE id IN (
    SELECT id FROM ({candidates})
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
-- RETURNING stays on one line: rqlite recognises it by the text 'returning '.
RETURNING id, kind, payload, queue, attempts, max_attempts, timeout, limits, lease_token, lease_until, retry, checkpoint

-- name: job_claim_candidates
-- Each queue gives at most what its limits leave: max_running minus the jobs
-- running now (kept by triggers in job_counts), and the whole tokens of its
-- rate bucket, refilled at rate_limit per rate_period since its last claim.
-- {now} is the store's clock in a claim; job_backlog reads with the node's own.
SELECT * FROM (
    SELECT id, priority, run_at FROM jobs
    WHERE state = 'queued' AND queue = :queue_{n}
        AND run_at <= {now}
        AND NOT EXISTS (SELECT 1 FROM queues WHERE name = :queue_{n} AND paused = 1)
        AND NOT EXISTS (
            SELECT 1 FROM json_each(jobs.labels) AS needed
            WHERE needed.value NOT IN (SELECT value FROM json_each(:labels))
        )
    ORDER BY priority DESC, run_at, id
    LIMIT MAX(0, MIN(
        :limit,
        COALESCE(
            (SELECT max_running FROM queues WHERE name = :queue_{n})
                - COALESCE(
                    (SELECT n FROM job_counts WHERE queue = :queue_{n} AND state = 'running'), 0
                ),
            :limit
        ),
        COALESCE((
            SELECT CAST(MIN(
                rate_limit,
                COALESCE(rate_tokens, rate_limit)
                    + ({now} - COALESCE(rate_updated_at, 0))
                    * rate_limit / rate_period
            ) AS INTEGER)
            FROM queues WHERE name = :queue_{n} AND rate_limit IS NOT NULL
        ), :limit)
    ))
)

-- name: job_claimable
-- A read, so it is not replicated: the answering node's own clock is good
-- enough to decide whether a claim (a write) is worth sending. rqlite leaves
-- 'now' in a read alone but rounds it in a write to about the nearest 1e-6
-- day, so a new job's run_at can lie up to 43 ms ahead of the clock: the
-- read allows 50 ms, or such a job would look not yet due for that long. A
-- job delayed to within 50 ms of now may cost an early, empty claim.
SELECT EXISTS (
    SELECT 1 FROM jobs
    WHERE state = 'queued'
        AND queue IN (SELECT value FROM json_each(:queues))
        AND queue NOT IN (SELECT name FROM queues WHERE paused = 1)
        AND run_at <= (julianday('now') - 2440587.5) * 86400.0 + 0.05
) AS ready

-- name: job_backlog
-- How many jobs a claim would take now, up to :limit: the claim's own
-- candidates (job_claim_candidates, one branch per queue), counted by a read.
-- Each branch stops at :limit rows of its queue's claim index, and the caps of
-- max_running and the rate bucket come from job_counts and queues: the read
-- costs the same with a million jobs waiting as with a few.
SELECT count(*) AS n FROM (SELECT 1 FROM ({candidates}) LIMIT :limit)

-- name: queue_rate_spend
-- Take this claim's starts out of each rate-limited queue's bucket.
UPDATE queues SET
    rate_tokens = MIN(
        rate_limit,
        COALESCE(rate_tokens, rate_limit)
            + ((SELECT now FROM taskq_clock)
                - COALESCE(rate_updated_at, (SELECT now FROM taskq_clock)))
            * rate_limit / rate_period
    ) - (
        SELECT count(*) FROM jobs
        WHERE state = 'running' AND worker_id = :worker_id AND queue = queues.name
            AND lease_token > :claim_token || '.' AND lease_token < :claim_token || '/'
    ),
    rate_updated_at = (SELECT now FROM taskq_clock)
WHERE rate_limit IS NOT NULL AND name IN (SELECT value FROM json_each(:queues))

-- name: execution_start
INSERT INTO executions (job_id, attempt, worker_id, lease_token, claimed_at, started_at)
SELECT id, attempts, worker_id, lease_token, claimed_at, started_at FROM jobs
WHERE state = 'running' AND worker_id = :worker_id
    AND lease_token > :claim_token || '.' AND lease_token < :claim_token || '/'

-- name: job_claimed_by_token
SELECT id, kind, payload, queue, attempts, max_attempts, timeout, limits, lease_token, lease_until,
    retry, checkpoint
FROM jobs
WHERE state = 'running' AND worker_id = :worker_id
    AND lease_token > :claim_token || '.' AND lease_token < :claim_token || '/'
ORDER BY priority DESC, run_at, id

-- name: job_heartbeat
UPDATE jobs SET lease_until = (SELECT now FROM taskq_clock) + :lease_seconds
WHERE state = 'running' AND worker_id = :worker_id AND cancel_requested = 0
    AND lease_token IN (SELECT value FROM json_each(:tokens))
RETURNING id, lease_token, lease_until

-- name: worker_heartbeat
UPDATE workers SET
    heartbeat_at = (SELECT now FROM taskq_clock),
    running = :running,
    slots = COALESCE(:slots, slots),
    state = CASE WHEN state = 'lost' THEN 'active' ELSE state END
WHERE id = :worker_id

-- Reports arrive as one JSON array per statement, so a batch of finished jobs
-- costs the same few statements whatever its size. Each row is fenced by its
-- own lease: job id and token must still match a running job. A row may carry
-- the attempt's last progress, which a job that ends quickly has never sent.
-- A row's 'waited' and 'ran' are the worker's measures of the attempt: from the
-- claim to the start of the job's code, and from there to its end. The store
-- places them after its own claim time, never past its own now; without them
-- the attempt keeps its claim as its start and ends now.
-- name: execution_finish
UPDATE executions SET
    started_at = MIN(
        (SELECT now FROM taskq_clock),
        COALESCE(claimed_at + (report.value ->> '$.waited'), started_at)
    ),
    finished_at = MIN(
        (SELECT now FROM taskq_clock),
        COALESCE(
            claimed_at + (report.value ->> '$.waited') + (report.value ->> '$.ran'),
            (SELECT now FROM taskq_clock)
        )
    ),
    outcome = report.value ->> '$.outcome',
    exit_code = report.value ->> '$.exit_code',
    signal = report.value ->> '$.signal',
    peak_rss_bytes = report.value ->> '$.peak_rss_bytes',
    cpu_seconds = report.value ->> '$.cpu_seconds',
    log_tail = report.value ->> '$.log_tail',
    error = report.value ->> '$.error'
FROM json_each(:reports) AS report
WHERE executions.lease_token = report.value ->> '$.lease_token'
    AND executions.finished_at IS NULL
    AND EXISTS (
        SELECT 1 FROM jobs
        WHERE jobs.id = report.value ->> '$.job_id'
            AND jobs.lease_token = executions.lease_token AND jobs.state = 'running'
    )

-- name: job_complete
UPDATE jobs SET
    state = 'succeeded',
    result = report.value ->> '$.result',
    error = NULL,
    -- The attempt's own times, as execution_finish (earlier in the request) left them.
    started_at = (SELECT started_at FROM executions WHERE lease_token = jobs.lease_token),
    finished_at = (SELECT finished_at FROM executions WHERE lease_token = jobs.lease_token),
    progress = COALESCE(report.value ->> '$.progress', progress),
    progress_message = COALESCE(report.value ->> '$.progress_message', progress_message),
    lease_until = NULL
FROM json_each(:reports) AS report
WHERE jobs.id = report.value ->> '$.job_id'
    AND jobs.lease_token = report.value ->> '$.lease_token' AND jobs.state = 'running'
RETURNING jobs.id, jobs.lease_token

-- name: job_fail
-- A retryable failure with attempts left, not given up, is queued again at the
-- store's time plus its delay: the report's own (the job's retry policy,
-- applied by the worker to this attempt), else the backoff given here.
UPDATE jobs SET
    state = CASE
        WHEN report.value ->> '$.retryable' = 0 THEN 'failed'
        WHEN report.value ->> '$.give_up' = 1 OR attempts >= max_attempts THEN 'dead'
        ELSE 'queued'
    END,
    run_at = CASE
        WHEN report.value ->> '$.retryable' = 1 AND report.value ->> '$.give_up' = 0
            AND attempts < max_attempts
        THEN (SELECT now FROM taskq_clock) + COALESCE(
            report.value ->> '$.delay',
            MIN(:backoff_cap, :backoff_base * (1 << MIN(attempts - 1, 30)))
                * (report.value ->> '$.jitter')
        )
        ELSE run_at
    END,
    started_at = (SELECT started_at FROM executions WHERE lease_token = jobs.lease_token),
    finished_at = CASE
        WHEN report.value ->> '$.retryable' = 1 AND report.value ->> '$.give_up' = 0
            AND attempts < max_attempts
        THEN NULL
        ELSE (SELECT finished_at FROM executions WHERE lease_token = jobs.lease_token)
    END,
    error = report.value ->> '$.error',
    checkpoint = COALESCE(report.value ->> '$.checkpoint', checkpoint),
    progress = COALESCE(report.value ->> '$.progress', progress),
    progress_message = COALESCE(report.value ->> '$.progress_message', progress_message),
    lease_until = NULL
FROM json_each(:reports) AS report
WHERE jobs.id = report.value ->> '$.job_id'
    AND jobs.lease_token = report.value ->> '$.lease_token' AND jobs.state = 'running'
RETURNING jobs.id, jobs.lease_token

-- name: job_release
UPDATE jobs SET
    state = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'queued' END,
    attempts = CASE WHEN cancel_requested = 1 THEN attempts ELSE attempts - 1 END,
    finished_at = CASE WHEN cancel_requested = 1 THEN (SELECT now FROM taskq_clock) END,
    run_at = (SELECT now FROM taskq_clock),
    checkpoint = COALESCE(report.value ->> '$.checkpoint', checkpoint),
    progress = COALESCE(report.value ->> '$.progress', progress),
    progress_message = COALESCE(report.value ->> '$.progress_message', progress_message),
    lease_until = NULL
FROM json_each(:reports) AS report
WHERE jobs.id = report.value ->> '$.job_id'
    AND jobs.lease_token = report.value ->> '$.lease_token' AND jobs.state = 'running'
RETURNING jobs.id, jobs.lease_token

-- name: job_lease_states
SELECT id, state, lease_token FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: job_progress
UPDATE jobs SET
    progress = :progress,
    progress_message = :message,
    checkpoint = COALESCE(:checkpoint, checkpoint)
WHERE id = :job_id AND lease_token = :lease_token AND state = 'running'
RETURNING id
