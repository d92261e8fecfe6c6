-- Reports of finished attempts under a lease (taskq/broker/ops/leases.py).

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
    error = report.value ->> '$.error',
    -- Where its output ends, when the report brings the last of it (output_statements):
    -- further on than any earlier write of the attempt.
    output_bytes = COALESCE(report.value ->> '$.output_end', output_bytes),
    -- All of its output, when that is small and came whole with the report
    -- (output.inline_text): stored here, in place of a chunk in job_output.
    output_inline = report.value ->> '$.output_inline'
FROM json_each(:reports) AS report
WHERE executions.lease_token = report.value ->> '$.lease_token'
    AND executions.finished_at IS NULL
    AND EXISTS (
        SELECT 1 FROM jobs
        WHERE jobs.id = report.value ->> '$.job_id'
            AND jobs.lease_token = executions.lease_token AND jobs.state = 'running'
    )

-- Who holds a job: worker_id, claimed_at and started_at name the attempt under
-- way while the job runs (job_claim sets them), and stay with the attempt that
-- ended it (a report, or its lease's expiry). A job queued or waiting has no
-- attempt under way, so each statement that puts one back clears them:
-- job_fail's retry and job_release here, job_requeue_expired (maintenance.sql),
-- job_retry (jobs.sql); a job that ends from there (a cancel, a parent's end)
-- names none. Every attempt keeps its worker and times in executions (taskq
-- logs). A report leaves lease_token as it was: a report resent after a lost
-- answer reads it to learn that it landed (leases.py, _unsettled).
-- name: job_complete
UPDATE jobs SET
    state = 'succeeded',
    result = report.value ->> '$.result',
    error = NULL,
    -- The attempt's own times, as execution_finish (earlier in the request) left them.
    started_at = (SELECT started_at FROM executions WHERE lease_token = jobs.lease_token),
    finished_at = (SELECT finished_at FROM executions WHERE lease_token = jobs.lease_token),
    {job_report_end}

-- name: job_fail
-- A retryable failure with attempts left, not given up, is queued again at the
-- store's time plus its delay: the report's own (the job's retry policy,
-- applied by the worker to this attempt), else the backoff given here. A job
-- whose cancel was asked for while it ran ends cancelled instead: queued
-- again, its next claim would forget the cancel and run it.
UPDATE jobs SET
    state = CASE
        WHEN report.value ->> '$.retryable' = 0 THEN 'failed'
        WHEN report.value ->> '$.give_up' = 1 OR attempts >= max_attempts THEN 'dead'
        WHEN cancel_requested = 1 THEN 'cancelled'
        ELSE 'queued'
    END,
    run_at = CASE
        WHEN {job_fail_requeues}
        THEN (SELECT now FROM taskq_clock) + COALESCE(
            report.value ->> '$.delay',
            MIN(:backoff_cap, :backoff_base * (1 << MIN(attempts - 1, 30)))
                * (report.value ->> '$.jitter')
        )
        ELSE run_at
    END,
    -- Queued again, it names no holder (the rule above job_complete); ended, it
    -- keeps its last attempt's worker and times, as execution_finish left them.
    worker_id = CASE WHEN {job_fail_requeues} THEN NULL ELSE worker_id END,
    claimed_at = CASE WHEN {job_fail_requeues} THEN NULL ELSE claimed_at END,
    started_at = CASE WHEN {job_fail_requeues} THEN NULL
        ELSE (SELECT started_at FROM executions WHERE lease_token = jobs.lease_token) END,
    finished_at = CASE WHEN {job_fail_requeues} THEN NULL
        ELSE (SELECT finished_at FROM executions WHERE lease_token = jobs.lease_token) END,
    error = report.value ->> '$.error',
    checkpoint = COALESCE(report.value ->> '$.checkpoint', checkpoint),
    {job_report_end}

-- name: job_release
UPDATE jobs SET
    state = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'queued' END,
    attempts = CASE WHEN cancel_requested = 1 THEN attempts ELSE attempts - 1 END,
    finished_at = CASE WHEN cancel_requested = 1 THEN (SELECT now FROM taskq_clock) END,
    error = CASE WHEN cancel_requested = 1 THEN COALESCE(
        error,
        json_object('type', 'Cancelled', 'message', 'cancelled by request while running; its worker stopped it')
    ) ELSE error END,
    run_at = (SELECT now FROM taskq_clock) + COALESCE(report.value ->> '$.delay', 0),
    -- Queued again, it names no holder (the rule above job_complete); cancelled,
    -- it keeps its last attempt's worker and times.
    worker_id = CASE WHEN cancel_requested = 1 THEN worker_id END,
    claimed_at = CASE WHEN cancel_requested = 1 THEN claimed_at END,
    started_at = CASE WHEN cancel_requested = 1 THEN started_at END,
    checkpoint = COALESCE(report.value ->> '$.checkpoint', checkpoint),
    {job_report_end}

-- name: job_fail_requeues
-- In place of {job_fail_requeues} in job_fail: whether the failure reported puts
-- its job back in the queue (retryable, not given up, attempts left, no cancel asked).
(report.value ->> '$.retryable' = 1 AND report.value ->> '$.give_up' = 0
    AND attempts < max_attempts AND cancel_requested = 0)

-- name: job_report_end
-- How job_complete, job_fail and job_release end, in place of their
-- {job_report_end}: the progress the attempt last sent, kept; the lease given
-- up; and each row fenced by its own lease.
    progress = COALESCE(report.value ->> '$.progress', progress),
    progress_message = COALESCE(report.value ->> '$.progress_message', progress_message),
    lease_until = NULL
FROM json_each(:reports) AS report
WHERE jobs.id = report.value ->> '$.job_id'
    AND jobs.lease_token = report.value ->> '$.lease_token' AND jobs.state = 'running'
RETURNING jobs.id, jobs.lease_token

-- name: job_lease_states
SELECT id, state, lease_token FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))
