-- Named queries of the broker. Each block is headed `-- name: <name>` and is
-- looked up by that name.
--
-- Time. Every time is unix seconds (REAL) on the store's clock. A batch that
-- needs the time starts with `clock_tick`, which writes the clock's reading
-- (or an injected :now) into the single row of taskq_clock; its other
-- statements read `(SELECT now FROM taskq_clock)` and never mention 'now'.
-- rqlite rewrites julianday('now') into a literal on the node that receives
-- the write, so every replica stores the same value, but in rqlite 10.2 it
-- does not rewrite 'now' inside a subquery, and an UPDATE or DELETE whose
-- time is rewritten loses its RETURNING rows. Reading the clock row avoids
-- both. Resolution on rqlite is 1e-6 day (86 ms).
--
-- RETURNING stays on the same line as its first column: rqlite recognises it
-- by the text "returning " followed by a space.
--
-- Every LIMIT in a write follows an ORDER BY that ends in a unique column, so
-- every replica picks the same rows.

-- name: clock_tick
UPDATE taskq_clock SET now = COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0) WHERE id = 1

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS taskq_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
)

-- name: migration_list
SELECT version, name, applied_at FROM taskq_migrations ORDER BY version

-- name: migration_record
INSERT INTO taskq_migrations (version, name, applied_at)
VALUES (:version, :name, (julianday('now') - 2440587.5) * 86400.0)

-- name: job_enqueue
-- A key already stored is not enqueued again, and the broker reads its job.
-- A key stored with another request's fingerprint tries to change it, which
-- the trigger jobs_request_fingerprint_kept refuses: the whole batch fails,
-- and nothing of it is written. A job stored before fingerprints (NULL) or
-- under a random key (NULL: it comes back only in a resend) changes nothing.
INSERT INTO jobs (
    queue, kind, payload, priority, run_at, max_attempts, timeout, limits, labels,
    idempotency_key, request_fingerprint, submitter, created_at
)
SELECT
    json_extract(spec.value, '$.queue'),
    json_extract(spec.value, '$.kind'),
    json_extract(spec.value, '$.payload'),
    json_extract(spec.value, '$.priority'),
    COALESCE(
        json_extract(spec.value, '$.run_at'),
        (SELECT now FROM taskq_clock) + json_extract(spec.value, '$.delay')
    ),
    json_extract(spec.value, '$.max_attempts'),
    json_extract(spec.value, '$.timeout'),
    json_extract(spec.value, '$.limits'),
    json_extract(spec.value, '$.labels'),
    json_extract(spec.value, '$.key'),
    json_extract(spec.value, '$.fingerprint'),
    json_extract(spec.value, '$.submitter'),
    (SELECT now FROM taskq_clock)
FROM json_each(:specs) AS spec
WHERE true
ON CONFLICT (idempotency_key) DO UPDATE SET request_fingerprint = excluded.request_fingerprint
WHERE jobs.request_fingerprint <> excluded.request_fingerprint
RETURNING id, idempotency_key

-- name: job_by_key
SELECT id, idempotency_key, request_fingerprint FROM jobs
WHERE idempotency_key IN (SELECT value FROM json_each(:keys))

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
    started_at = (SELECT now FROM taskq_clock),
    cancel_requested = 0,
    progress = NULL,
    progress_message = NULL
WHERE id IN (
    SELECT id FROM ({candidates})
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
RETURNING id, kind, payload, queue, attempts, max_attempts, timeout, limits, lease_token, lease_until

-- name: job_claim_candidates
-- Each queue gives at most what its limits leave: max_running minus the jobs
-- running now (kept by triggers in job_counts), and the whole tokens of its
-- rate bucket, refilled at rate_limit per rate_period since its last claim.
SELECT * FROM (
    SELECT id, priority, run_at FROM jobs
    WHERE state = 'queued' AND queue = :queue_{n}
        AND run_at <= (SELECT now FROM taskq_clock)
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
                    + ((SELECT now FROM taskq_clock) - COALESCE(rate_updated_at, 0))
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

-- name: queue_set_limits
-- Only the limits flagged as given change; a changed rate starts a new bucket.
INSERT INTO queues (name, paused, updated_at, max_running, rate_limit, rate_period)
VALUES (
    :queue, 0, (SELECT now FROM taskq_clock), :max_running, :rate_limit, :rate_period
)
ON CONFLICT (name) DO UPDATE SET
    max_running = CASE WHEN :set_max_running THEN excluded.max_running ELSE max_running END,
    rate_limit = CASE WHEN :set_rate THEN excluded.rate_limit ELSE rate_limit END,
    rate_period = CASE WHEN :set_rate THEN excluded.rate_period ELSE rate_period END,
    rate_tokens = CASE WHEN :set_rate THEN NULL ELSE rate_tokens END,
    rate_updated_at = CASE WHEN :set_rate THEN NULL ELSE rate_updated_at END,
    updated_at = excluded.updated_at

-- name: submit_bucket_spend
-- Fails the CHECK (tokens >= 0), and so the whole enqueue, when the new jobs
-- are more than the submitter's bucket holds. Only keys not stored yet are
-- charged, so resending an enqueue (or a key) spends nothing twice. No limit
-- row: no limit.
INSERT INTO submit_buckets (submitter, tokens, updated_at)
SELECT
    :submitter,
    rate - (
        SELECT count(*) FROM json_each(:keys) AS key
        WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE idempotency_key = key.value)
    ),
    (SELECT now FROM taskq_clock)
FROM submit_limits
WHERE submitter IN (:submitter, '*')
ORDER BY submitter = '*'
LIMIT 1
ON CONFLICT (submitter) DO UPDATE SET
    tokens = MIN(
        (SELECT rate FROM submit_limits WHERE submitter IN (:submitter, '*')
            ORDER BY submitter = '*' LIMIT 1),
        submit_buckets.tokens
            + ((SELECT now FROM taskq_clock) - submit_buckets.updated_at)
            * (SELECT rate / period FROM submit_limits WHERE submitter IN (:submitter, '*')
                ORDER BY submitter = '*' LIMIT 1)
    ) - (
        SELECT count(*) FROM json_each(:keys) AS key
        WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE idempotency_key = key.value)
    ),
    updated_at = excluded.updated_at

-- name: submit_limit_of
SELECT l.rate, l.period, b.tokens, b.updated_at, (julianday('now') - 2440587.5) * 86400.0 AS now
FROM submit_limits AS l LEFT JOIN submit_buckets AS b ON b.submitter = :submitter
WHERE l.submitter IN (:submitter, '*')
ORDER BY l.submitter = '*'
LIMIT 1

-- name: submit_limit_set
INSERT INTO submit_limits (submitter, rate, period) VALUES (:submitter, :rate, :period)
ON CONFLICT (submitter) DO UPDATE SET rate = excluded.rate, period = excluded.period

-- name: submit_limit_delete
DELETE FROM submit_limits WHERE submitter = :submitter

-- name: submit_limit_list
SELECT submitter, rate, period FROM submit_limits ORDER BY submitter

-- name: execution_start
INSERT INTO executions (job_id, attempt, worker_id, lease_token, started_at)
SELECT id, attempts, worker_id, lease_token, started_at FROM jobs
WHERE state = 'running' AND worker_id = :worker_id
    AND lease_token > :claim_token || '.' AND lease_token < :claim_token || '/'

-- name: job_claimed_by_token
SELECT id, kind, payload, queue, attempts, max_attempts, timeout, limits, lease_token, lease_until
FROM jobs
WHERE state = 'running' AND worker_id = :worker_id
    AND lease_token > :claim_token || '.' AND lease_token < :claim_token || '/'
ORDER BY priority DESC, run_at, id

-- name: job_heartbeat
UPDATE jobs SET lease_until = (SELECT now FROM taskq_clock) + :lease_seconds
WHERE state = 'running' AND worker_id = :worker_id AND cancel_requested = 0
    AND lease_token IN (SELECT value FROM json_each(:tokens))
RETURNING id, lease_token, lease_until

-- Reports arrive as one JSON array per statement, so a batch of finished jobs
-- costs the same few statements whatever its size. Each row is fenced by its
-- own lease: job id and token must still match a running job.
-- name: execution_finish
UPDATE executions SET
    finished_at = (SELECT now FROM taskq_clock),
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
    finished_at = (SELECT now FROM taskq_clock),
    lease_until = NULL
FROM json_each(:reports) AS report
WHERE jobs.id = report.value ->> '$.job_id'
    AND jobs.lease_token = report.value ->> '$.lease_token' AND jobs.state = 'running'
RETURNING jobs.id, jobs.lease_token

-- name: job_fail
UPDATE jobs SET
    state = CASE
        WHEN report.value ->> '$.retryable' = 0 THEN 'failed'
        WHEN attempts >= max_attempts THEN 'dead'
        ELSE 'queued'
    END,
    run_at = CASE
        WHEN report.value ->> '$.retryable' = 1 AND attempts < max_attempts
        THEN (SELECT now FROM taskq_clock)
            + MIN(:backoff_cap, :backoff_base * (1 << MIN(attempts - 1, 30)))
            * (report.value ->> '$.jitter')
        ELSE run_at
    END,
    finished_at = CASE
        WHEN report.value ->> '$.retryable' = 1 AND attempts < max_attempts THEN NULL
        ELSE (SELECT now FROM taskq_clock)
    END,
    error = report.value ->> '$.error',
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
    lease_until = NULL
FROM json_each(:reports) AS report
WHERE jobs.id = report.value ->> '$.job_id'
    AND jobs.lease_token = report.value ->> '$.lease_token' AND jobs.state = 'running'
RETURNING jobs.id, jobs.lease_token

-- name: job_progress
UPDATE jobs SET progress = :progress, progress_message = :message
WHERE id = :job_id AND lease_token = :lease_token AND state = 'running'
RETURNING id

-- name: job_cancel_queued
UPDATE jobs SET state = 'cancelled', finished_at = (SELECT now FROM taskq_clock)
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'queued'
RETURNING id

-- name: job_cancel_running
UPDATE jobs SET cancel_requested = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running'
RETURNING id

-- name: job_retry
UPDATE jobs SET
    state = 'queued',
    run_at = (SELECT now FROM taskq_clock),
    max_attempts = MAX(max_attempts, attempts + 1),
    finished_at = NULL,
    cancel_requested = 0,
    lease_until = NULL
WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN ('failed', 'dead', 'cancelled')
RETURNING id

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

-- name: execution_prune
DELETE FROM executions WHERE job_id IN (
    SELECT id FROM jobs
    WHERE finished_at < (SELECT now FROM taskq_clock) - :retention_seconds
        AND state IN ('succeeded', 'failed', 'dead', 'cancelled')
    ORDER BY finished_at, id
    LIMIT :limit
)

-- name: job_prune
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE finished_at < (SELECT now FROM taskq_clock) - :retention_seconds
        AND state IN ('succeeded', 'failed', 'dead', 'cancelled')
    ORDER BY finished_at, id
    LIMIT :limit
)
RETURNING id

-- name: job_lease_states
SELECT id, state, lease_token FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))

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
SELECT * FROM jobs
WHERE id IN (SELECT job_id FROM executions WHERE worker_id = :worker_id) AND id < :before
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

-- name: job_counts
SELECT queue, state, n FROM job_counts WHERE n > 0

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
SELECT * FROM executions WHERE job_id = :job_id ORDER BY id

-- name: execution_list_by_worker
SELECT * FROM executions WHERE worker_id = :worker_id AND id < :before
ORDER BY id DESC LIMIT :limit

-- name: queue_set_paused
-- Only a queue that exists (it has jobs, or a row of settings) changes, unless
-- :create: a misspelt name must not quietly become a new paused queue. No row
-- returned: nothing was written.
INSERT INTO queues (name, paused, updated_at)
SELECT :queue, :paused, (SELECT now FROM taskq_clock)
WHERE :create
    OR EXISTS (SELECT 1 FROM queues WHERE name = :queue)
    OR EXISTS (SELECT 1 FROM job_counts WHERE queue = :queue AND n > 0)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING name

-- name: queue_list
SELECT name, paused, max_running, rate_limit, rate_period FROM queues

-- name: worker_register
INSERT INTO workers (
    id, name, host, pid, queues, labels, slots, running, state, started_at, heartbeat_at
)
VALUES (
    :worker_id, :name, :host, :pid, :queues, :labels, :slots, 0, 'active',
    (SELECT now FROM taskq_clock), (SELECT now FROM taskq_clock)
)
ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    labels = excluded.labels, slots = excluded.slots, running = 0, state = 'active',
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at

-- name: worker_heartbeat
UPDATE workers SET
    heartbeat_at = (SELECT now FROM taskq_clock),
    running = :running,
    state = CASE WHEN state = 'lost' THEN 'active' ELSE state END
WHERE id = :worker_id

-- name: worker_set_state
UPDATE workers SET state = :state, heartbeat_at = (SELECT now FROM taskq_clock)
WHERE id = :worker_id

-- name: worker_mark_lost
UPDATE workers SET state = 'lost'
WHERE state IN ('active', 'draining')
    AND heartbeat_at < (SELECT now FROM taskq_clock) - :grace_seconds
RETURNING id

-- name: worker_prune
DELETE FROM workers
WHERE state IN ('stopped', 'lost')
    AND heartbeat_at < (SELECT now FROM taskq_clock) - :retention_seconds
RETURNING id

-- name: worker_list
-- A stopped worker runs nothing, and a lost one is not known to: whatever
-- either last reported, it has no busy slots (a lost worker's jobs go back to
-- their queues when their leases run out; its next heartbeat reports again).
SELECT
    id, name, host, pid, queues, labels, slots,
    CASE WHEN state IN ('stopped', 'lost') THEN 0 ELSE running END AS running,
    state, started_at, heartbeat_at
FROM workers
ORDER BY name, id

-- name: leader_attempt_elect
INSERT INTO leader (name, holder, expires_at)
VALUES (:name, :holder, (SELECT now FROM taskq_clock) + :ttl_seconds)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE leader.holder = excluded.holder OR leader.expires_at < (SELECT now FROM taskq_clock)
RETURNING holder

-- name: leader_resign
DELETE FROM leader WHERE name = :name AND holder = :holder

-- name: leader_open
SELECT NOT EXISTS (
    SELECT 1 FROM leader
    WHERE name = :name AND holder <> :holder
        AND expires_at >= COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
) AS open

-- name: leader_get
SELECT name, holder, expires_at FROM leader WHERE name = :name

-- name: clock_read
SELECT (julianday('now') - 2440587.5) * 86400.0 AS now

-- name: schedule_replace
-- Only when asked to; the schedule keeps its pause and its last tick.
UPDATE schedules SET
    cron = :cron, every_seconds = :every_seconds, timezone = :timezone, spec = :spec,
    catch_up = :catch_up, next_fire_at = :next_fire_at, created_at = (SELECT now FROM taskq_clock)
WHERE name = :name
RETURNING *

-- name: schedule_insert
-- A name already taken (or just replaced, in the same batch) is left alone.
INSERT INTO schedules (
    name, cron, every_seconds, timezone, spec, paused, catch_up, next_fire_at, created_at
)
VALUES (
    :name, :cron, :every_seconds, :timezone, :spec, 0, :catch_up, :next_fire_at,
    (SELECT now FROM taskq_clock)
)
ON CONFLICT (name) DO NOTHING
RETURNING *

-- name: schedule_get
SELECT * FROM schedules WHERE name = :name

-- name: schedule_delete
DELETE FROM schedules WHERE name = :name RETURNING name

-- name: schedule_set_paused
UPDATE schedules SET paused = :paused WHERE name = :name RETURNING name

-- name: schedule_list
SELECT * FROM schedules ORDER BY name

-- name: schedule_due
SELECT * FROM schedules WHERE paused = 0 AND next_fire_at <= :now
ORDER BY next_fire_at, name LIMIT :limit

-- name: schedule_fire_record
INSERT INTO schedule_fires (schedule, fire_at) VALUES (:name, :fire_at)
ON CONFLICT (schedule, fire_at) DO NOTHING

-- name: schedule_fire_enqueue
-- Only the batch that recorded the tick (job_id still NULL) enqueues its job.
INSERT INTO jobs (
    queue, kind, payload, priority, run_at, max_attempts, timeout, limits, labels,
    idempotency_key, submitter, created_at
)
SELECT
    json_extract(s.spec, '$.queue'),
    json_extract(s.spec, '$.kind'),
    json_extract(s.spec, '$.payload'),
    json_extract(s.spec, '$.priority'),
    f.fire_at,
    json_extract(s.spec, '$.max_attempts'),
    json_extract(s.spec, '$.timeout'),
    json_extract(s.spec, '$.limits'),
    json_extract(s.spec, '$.labels'),
    :key,
    'schedule:' || s.name,
    (SELECT now FROM taskq_clock)
FROM schedule_fires AS f JOIN schedules AS s ON s.name = f.schedule
WHERE f.schedule = :name AND f.fire_at = :fire_at AND f.job_id IS NULL
ON CONFLICT (idempotency_key) DO NOTHING

-- name: schedule_fire_link
UPDATE schedule_fires SET job_id = (SELECT id FROM jobs WHERE idempotency_key = :key)
WHERE schedule = :name AND fire_at = :fire_at AND job_id IS NULL
RETURNING job_id

-- name: schedule_advance
UPDATE schedules SET
    next_fire_at = :next_fire_at,
    last_fired_at = COALESCE(:fired_at, last_fired_at)
WHERE name = :name AND next_fire_at < :next_fire_at
