-- Enqueue (taskq/broker/ops/enqueue.py): the one job INSERT, also used by
-- schedule firing, and the submit limits it spends.

-- name: job_insert
-- The one INSERT of jobs, for enqueue and for schedule firing alike. {specs}
-- is a query with one column, spec: a job's fields as a JSON object, as
-- taskq.broker.ops.enqueue.checked_row makes them (job_enqueue_spec and
-- job_enqueue_specs read them from the request, schedule_fire_spec from a due
-- schedule).
--
-- A key already stored is not enqueued again, and the broker reads its job.
-- A key stored with another request's fingerprint tries to change it, which
-- the trigger jobs_request_fingerprint_kept refuses: the whole batch fails,
-- and nothing of it is written. A job stored before fingerprints (NULL) or
-- under a key with no fingerprint (NULL: a random key comes back only in a
-- resend, a schedule's tick only once) changes nothing.
--
-- What a job leaves out (max_attempts, timeout, retry: null; limits: by name)
-- its queue's job_defaults give, read here, in the same statement.
--
-- {workflow_columns} and {workflow_values} are empty for jobs on their own,
-- or job_insert_workflow_columns and job_insert_workflow_values for a write
-- with jobs that wait for parents or join a workflow. {identity} is a job's
-- key and fingerprint: job_insert_own_identity, from its spec, or
-- job_insert_positional_identity for a workflow's jobs. {returning} is
-- job_insert_returning, or empty for one job: its id is then the write's last
-- insert id, when the write inserted a row (a key already stored inserts
-- none, and the broker reads its job), and SQLite builds no table for rows
-- to return.
INSERT INTO jobs (
    queue, kind, payload, priority, run_at, max_attempts, timeout, limits, labels,
    idempotency_key, request_fingerprint, submitter, created_at, retry{workflow_columns}
)
SELECT
    json_extract(job.spec, '$.queue'),
    json_extract(job.spec, '$.kind'),
    json_extract(job.spec, '$.payload'),
    json_extract(job.spec, '$.priority'),
    COALESCE(
        json_extract(job.spec, '$.run_at'),
        (SELECT now FROM taskq_clock) + json_extract(job.spec, '$.delay')
    ),
    COALESCE(
        json_extract(job.spec, '$.max_attempts'), json_extract(q.job_defaults, '$.max_attempts'), 3
    ),
    COALESCE(json_extract(job.spec, '$.timeout'), json_extract(q.job_defaults, '$.timeout')),
    CASE
        WHEN json_extract(q.job_defaults, '$.limits') IS NULL THEN json_extract(job.spec, '$.limits')
        ELSE json_patch(
            json_extract(q.job_defaults, '$.limits'), json_extract(job.spec, '$.limits')
        )
    END,
    json_extract(job.spec, '$.labels'),
    {identity},
    json_extract(job.spec, '$.submitter'),
    (SELECT now FROM taskq_clock),
    COALESCE(json_extract(job.spec, '$.retry'), json_extract(q.job_defaults, '$.retry')){workflow_values}
FROM ({specs}) AS job
LEFT JOIN queues AS q ON q.name = json_extract(job.spec, '$.queue')
WHERE true
ON CONFLICT (idempotency_key) DO UPDATE SET request_fingerprint = excluded.request_fingerprint
WHERE jobs.request_fingerprint <> excluded.request_fingerprint
{returning}

-- name: job_insert_returning
RETURNING id, idempotency_key

-- name: job_insert_own_identity
json_extract(job.spec, '$.key'), json_extract(job.spec, '$.fingerprint')

-- name: job_insert_positional_identity
-- A workflow's jobs are keyed by position: the workflow's key (:key_prefix),
-- a slash and the job's place in the request ({specs} gives it as column
-- at), and all carry the workflow's fingerprint. Their specs leave both out:
-- for a workflow of 10,000 jobs, half a megabyte less to send and replicate.
:key_prefix || '/' || job.at, :fingerprint

-- name: job_insert_workflow_columns
state, workflow_id, run_anyway, parent_count, parents_left, has_children

-- name: job_insert_workflow_values
-- A spec's fields past checked_row's (ops.dependencies.spec_fields), each
-- left out when it is its default; a job with no workflow of its own joins
-- the one whose key is :workflow_key, if any: a workflow written by the same
-- request, whose id the request cannot know.
COALESCE(json_extract(job.spec, '$.state'), 'queued'),
COALESCE(
    json_extract(job.spec, '$.workflow_id'),
    (SELECT id FROM workflows WHERE idempotency_key = :workflow_key)
),
COALESCE(json_extract(job.spec, '$.run_anyway'), 0),
COALESCE(json_extract(job.spec, '$.parent_count'), 0),
-- None of its parents has ended yet, as far as this INSERT knows: a child whose
-- parents are all new in the request needs no recount (one over a stored
-- parent follows: job_parents_recount), and no waiting job enters
-- jobs_releasable only to leave it again in the same write.
COALESCE(json_extract(job.spec, '$.parent_count'), 0),
COALESCE(json_extract(job.spec, '$.has_children'), 0)

-- name: job_enqueue_specs
SELECT value AS spec FROM json_each(:specs)

-- name: job_enqueue_positional_specs
-- A workflow's specs, each with its position (job_insert_positional_identity).
SELECT key AS at, value AS spec FROM json_each(:specs)

-- name: job_enqueue_spec
-- One job's spec, as the request gives it. Through json_each each spec
-- would be written out anew and read again for every field.
SELECT :spec AS spec

-- name: job_insert_one
-- One job on its own (no parents, no workflow), its fields as parameters:
-- job_insert for a single spec, with nothing to read out of JSON. The store
-- compiles each statement anew on rqlite, on every node, for every request:
-- this one compiles in about three quarters of job_insert's time, and sends
-- no JSON to parse. What it writes is job_insert's: the same columns from the
-- same fields (taskq.broker.ops.enqueue.checked_row's, retry as JSON text),
-- the queue's defaults and the clock read the same way, the same conflict
-- clause (see job_insert for what a key already stored does).
INSERT INTO jobs (
    queue, kind, payload, priority, run_at, max_attempts, timeout, limits, labels,
    idempotency_key, request_fingerprint, submitter, created_at, retry
)
SELECT
    :queue, :kind, :payload, :priority,
    COALESCE(:run_at, c.now + :delay),
    COALESCE(:max_attempts, json_extract(q.job_defaults, '$.max_attempts'), 3),
    COALESCE(:timeout, json_extract(q.job_defaults, '$.timeout')),
    CASE
        WHEN json_extract(q.job_defaults, '$.limits') IS NULL THEN :limits
        ELSE json_patch(json_extract(q.job_defaults, '$.limits'), :limits)
    END,
    :labels, :key, :fingerprint, :submitter, c.now,
    COALESCE(:retry, json_extract(q.job_defaults, '$.retry'))
FROM taskq_clock AS c
LEFT JOIN queues AS q ON q.name = :queue
WHERE c.id = 1
ON CONFLICT (idempotency_key) DO UPDATE SET request_fingerprint = excluded.request_fingerprint
WHERE jobs.request_fingerprint <> excluded.request_fingerprint

-- name: job_by_key
SELECT id, idempotency_key, request_fingerprint FROM jobs
WHERE idempotency_key IN (SELECT value FROM json_each(:keys))

-- name: submit_bucket_spend
-- Fails the CHECK (tokens >= 0), and so the whole enqueue, when the new jobs
-- are more than the submitter's bucket holds. Only keys not stored yet are
-- charged, so resending an enqueue (or a key) spends nothing twice. No limit
-- row: no limit, and nothing is written. The submitter's own limit, else the
-- one for everyone ('*'), is looked up by key: an IN list and an ORDER BY
-- would each build a temporary table on every submit, limits or none.
--
-- The bucket, refilled since it was last written (full if it has no row
-- yet), less the jobs, replaces the row it had. A REPLACE is one plain
-- INSERT to compile where an upsert compiles an UPDATE too, and rqlite
-- compiles every statement of every request on every node; a CHECK that
-- fails still fails the statement (REPLACE resolves only uniqueness).
--
-- {unstored} counts the request's keys not stored yet (submit_unstored_keys,
-- submit_unstored_key for one, or submit_unstored_positions for a
-- workflow's jobs).
INSERT OR REPLACE INTO submit_buckets (submitter, tokens, updated_at)
SELECT
    :submitter,
    MIN(l.rate, COALESCE(b.tokens + (c.now - b.updated_at) * l.rate / l.period, l.rate))
        - ({unstored}),
    c.now
FROM submit_limits AS l
JOIN taskq_clock AS c
LEFT JOIN submit_buckets AS b ON b.submitter = :submitter
WHERE l.submitter = COALESCE(
    (SELECT submitter FROM submit_limits WHERE submitter = :submitter), '*'
)

-- name: submit_unstored_keys
SELECT count(*) FROM json_each(:keys) AS key
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE idempotency_key = key.value)

-- name: submit_unstored_key
-- submit_unstored_keys for a single key, with no JSON list to read.
SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE idempotency_key = :key)

-- name: submit_unstored_positions
-- The keys of a workflow's jobs (job_insert_positional_identity) by their positions.
SELECT count(*) FROM json_each(:positions) AS at
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE idempotency_key = :key_prefix || '/' || at.value)

-- name: submit_limit_of
SELECT l.rate, l.period, b.tokens, b.updated_at, (julianday('now') - 2440587.5) * 86400.0 AS now
FROM submit_limits AS l LEFT JOIN submit_buckets AS b ON b.submitter = :submitter
WHERE l.submitter IN (:submitter, '*')
ORDER BY l.submitter = '*'
LIMIT 1
