-- Queues and submitters: pauses, limits, counts (taskq/broker/ops/queues.py).

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

-- name: queue_set_limits
-- Only the limits flagged as given change; a changed rate starts a new bucket.
-- Only a queue that exists, unless :create, as queue_set_paused.
INSERT INTO queues (name, paused, updated_at, max_running, rate_limit, rate_period)
SELECT :queue, 0, (SELECT now FROM taskq_clock), :max_running, :rate_limit, :rate_period
WHERE :create
    OR EXISTS (SELECT 1 FROM queues WHERE name = :queue)
    OR EXISTS (SELECT 1 FROM job_counts WHERE queue = :queue AND n > 0)
ON CONFLICT (name) DO UPDATE SET
    max_running = CASE WHEN :set_max_running THEN excluded.max_running ELSE max_running END,
    rate_limit = CASE WHEN :set_rate THEN excluded.rate_limit ELSE rate_limit END,
    rate_period = CASE WHEN :set_rate THEN excluded.rate_period ELSE rate_period END,
    rate_tokens = CASE WHEN :set_rate THEN NULL ELSE rate_tokens END,
    rate_updated_at = CASE WHEN :set_rate THEN NULL ELSE rate_updated_at END,
    updated_at = excluded.updated_at
RETURNING name

-- name: queue_set_defaults
-- :changes is a JSON object of the defaults given; a null one is lifted
-- (json_patch removes it), one not given stays, in the same statement.
-- Only a queue that exists, unless :create, as queue_set_paused.
INSERT INTO queues (name, paused, updated_at, job_defaults)
SELECT :queue, 0, (SELECT now FROM taskq_clock), json_patch('{}', :changes)
WHERE :create
    OR EXISTS (SELECT 1 FROM queues WHERE name = :queue)
    OR EXISTS (SELECT 1 FROM job_counts WHERE queue = :queue AND n > 0)
ON CONFLICT (name) DO UPDATE SET
    job_defaults = json_patch(COALESCE(job_defaults, '{}'), :changes),
    updated_at = excluded.updated_at
RETURNING name

-- name: queue_defaults_tidy
-- After a change of a queue's settings: a default "limits" left empty (its
-- last limit lifted, which json_patch leaves as {}) goes, as if none was set,
-- so that a queue left with no settings is forgotten next.
UPDATE queues SET job_defaults = json_remove(job_defaults, '$.limits')
WHERE name = :queue AND json_valid(job_defaults) AND job_defaults ->> '$.limits' = '{}'

-- name: queue_settings_forget
-- After a change of a queue's settings: the row of one left with none (not
-- paused, no limit, no default) goes, so a queue whose settings are all
-- lifted is gone once it has no jobs, as if it had never been set up;
-- unless the change asked to :create it.
DELETE FROM queues
WHERE name = :queue AND NOT :create
    AND paused = 0 AND max_running IS NULL AND rate_limit IS NULL
    AND (job_defaults IS NULL OR job_defaults = '{}')

-- name: queue_list
SELECT name, paused, max_running, rate_limit, rate_period, job_defaults FROM queues

-- name: job_counts
SELECT queue, state, n FROM job_counts WHERE n > 0

-- name: submit_limit_set
INSERT INTO submit_limits (submitter, rate, period) VALUES (:submitter, :rate, :period)
ON CONFLICT (submitter) DO UPDATE SET rate = excluded.rate, period = excluded.period

-- name: submit_limit_delete
DELETE FROM submit_limits WHERE submitter = :submitter

-- name: submit_limit_list
SELECT submitter, rate, period FROM submit_limits ORDER BY submitter
