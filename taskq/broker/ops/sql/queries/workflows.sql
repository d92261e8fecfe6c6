-- Workflows (taskq/broker/ops/workflows.py): submitting them whole, a
-- running job's fan-out, and their reads. What keeps their jobs' waits
-- settled is in dependencies.sql.

-- name: workflow_insert
-- A workflow's key stands for one request, as a job's does: the same request
-- again finds its row and changes nothing; another tries to change the
-- fingerprint, which workflows_request_fingerprint_kept refuses.
INSERT INTO workflows (name, idempotency_key, request_fingerprint, submitter, created_at)
VALUES (:name, :key, :fingerprint, :submitter, (SELECT now FROM taskq_clock))
-- A new row returns its id (no read after the write); the same request again
-- returns nothing, and its id is read by key.
ON CONFLICT (idempotency_key) DO UPDATE SET request_fingerprint = excluded.request_fingerprint
WHERE workflows.request_fingerprint <> excluded.request_fingerprint
RETURNING id

-- name: workflow_by_key
SELECT w.id, (SELECT min(id) FROM jobs WHERE workflow_id = w.id) AS first_job
FROM workflows AS w WHERE w.idempotency_key = :key

-- The three statements of a fan-out, each fenced by the reporting job's lease
-- (the job still running under :lease_token), before the report that
-- completes the job: a report refused writes none of it. Nor does one whose
-- cancel was asked while it ran (it ended before it heard): its workflow may
-- have been cancelled whole, and new jobs would run after the cancel.

-- name: workflow_spawn_create
-- The reporting job's workflow, when it is in none yet: its submitter's, unless
-- the spawn names one.
INSERT INTO workflows (name, idempotency_key, submitter, created_at)
SELECT :name, :key, CASE WHEN :submitter = '' THEN submitter ELSE :submitter END,
    (SELECT now FROM taskq_clock)
FROM jobs
WHERE id = :job_id AND lease_token = :lease_token AND state = 'running' AND workflow_id IS NULL
    AND cancel_requested = 0
ON CONFLICT (idempotency_key) DO NOTHING

-- name: workflow_spawn_join
UPDATE jobs SET workflow_id = (SELECT id FROM workflows WHERE idempotency_key = :key)
WHERE id = :job_id AND lease_token = :lease_token AND state = 'running' AND workflow_id IS NULL
    AND cancel_requested = 0

-- name: workflow_spawn_specs
-- In place of job_insert's {specs}: the spawned jobs, each with its position
-- (they are keyed by it: enqueue.sql's job_insert_positional_identity).
SELECT key AS at, value AS spec FROM json_each(:specs)
WHERE EXISTS (
    SELECT 1 FROM jobs
    WHERE id = :job_id AND lease_token = :lease_token AND state = 'running'
        AND cancel_requested = 0
)

-- name: workflow_spawn_submitter
-- After the spawned jobs' INSERT: those that name no submitter are the
-- spawning job's submitter's, as a client's jobs are its own, so that a
-- listing by submitter finds the whole pipeline. Found by their keys (the
-- spawn's :key, then '/' and a position); a report refused wrote none. The
-- unary + keeps the planner off jobs_submitter_id, where '' may be most jobs.
UPDATE jobs SET submitter = (SELECT submitter FROM jobs WHERE id = :job_id)
WHERE idempotency_key > :key || '/' AND idempotency_key < :key || '0' AND +submitter = ''

-- name: workflow_get
-- The workflow and how many of its jobs are in each state (state NULL: it
-- has none left).
SELECT w.id, w.name, w.submitter, w.created_at, job.state, count(job.id) AS n
FROM workflows AS w
LEFT JOIN jobs AS job INDEXED BY jobs_workflow ON job.workflow_id = w.id
WHERE w.id = :workflow_id
GROUP BY job.state

-- name: workflow_list
-- A page of workflows, newest first (keyset-paged by :before), each with how
-- many of its jobs are in each state, a row per workflow and state (state
-- NULL: it has none left). The page ({page}: workflow_list_page, or
-- workflow_list_running_page) is chosen before its jobs are counted: only
-- its own workflows' jobs are read.
WITH page AS MATERIALIZED ({page})
SELECT page.id, page.name, page.submitter, page.created_at, job.state, count(job.id) AS n
FROM page
LEFT JOIN jobs AS job INDEXED BY jobs_workflow ON job.workflow_id = page.id
GROUP BY page.id, job.state
ORDER BY page.id DESC

-- name: workflow_list_page
-- In place of workflow_list's {page}: the newest :limit workflows before
-- :before. :name and :submitter, when not NULL, keep the workflows of that
-- name and of that submitter.
SELECT id, name, submitter, created_at FROM workflows
WHERE id < :before
    AND (:name IS NULL OR name = :name)
    AND (:submitter IS NULL OR submitter = :submitter)
ORDER BY id DESC
LIMIT :limit

-- name: workflow_list_running_page
-- In place of workflow_list's {page}, for the status 'running': the page of
-- workflow_list_page, of the workflows of the jobs yet to end (waiting or
-- queued ones in jobs_state_id, running ones in jobs_lease). Those are few
-- beside the finished jobs of a store that keeps its history, which a pass
-- would count one workflow at a time to tell the running ones apart.
WITH live AS MATERIALIZED (
    SELECT workflow_id AS id FROM jobs INDEXED BY jobs_state_id
    WHERE state NOT IN ('running', 'succeeded') AND state IN ('waiting', 'queued')
        AND workflow_id < :before
    UNION
    SELECT workflow_id FROM jobs INDEXED BY jobs_lease
    WHERE state = 'running' AND workflow_id < :before
)
SELECT id, name, submitter, created_at FROM workflows
WHERE id IN (SELECT id FROM live)
    AND (:name IS NULL OR name = :name)
    AND (:submitter IS NULL OR submitter = :submitter)
ORDER BY id DESC
LIMIT :limit

-- name: workflow_unfinished_jobs
-- How many jobs have yet to end, from the counts the triggers keep: whether
-- workflow_list_running_page's read of them is the cheaper way to a page.
SELECT coalesce(sum(n), 0) AS n FROM job_counts WHERE state IN ('waiting', 'queued', 'running')

-- name: workflow_jobs
-- The workflow's jobs by id, oldest first, and their states: the index
-- (workflow_id, id) gives the order, the row the state. Those its own submit
-- wrote are keyed by the workflow's key, a slash and their position
-- (workflows.py, WorkflowRows); a spawned job's key is its spawn's, and a job
-- that joined it with after= has a key of its own. The prefix is read once.
SELECT id, state,
    substr(idempotency_key, 1, length(prefix.text)) = prefix.text AS submitted
FROM (SELECT idempotency_key || '/' AS text FROM workflows WHERE id = :workflow_id) AS prefix,
    jobs INDEXED BY jobs_workflow
WHERE workflow_id = :workflow_id
ORDER BY id

-- name: workflow_edges
-- The workflow's dependencies, and which job spawned which (spawned = 1). A
-- spawned job's key is its spawn's ('spawn:' and the spawning attempt's lease
-- token: workflow_spawn_specs) then '/' and its position; the lease names the
-- attempt, whose execution row names the job. A lease token has no '/'.
SELECT parent_id, child_id, spawned FROM (
    SELECT edge.parent_id, edge.child_id, 0 AS spawned, edge.position
    FROM jobs AS child INDEXED BY jobs_workflow
    JOIN job_parents AS edge ON edge.child_id = child.id
    WHERE child.workflow_id = :workflow_id
    UNION ALL
    SELECT attempt.job_id, child.id, 1, -1
    FROM jobs AS child INDEXED BY jobs_workflow
    JOIN executions AS attempt
        ON attempt.lease_token = substr(
            child.idempotency_key, 7, instr(child.idempotency_key, '/') - 7
        )
    WHERE child.workflow_id = :workflow_id AND child.idempotency_key LIKE 'spawn:%/%'
)
ORDER BY child_id, position

-- name: workflow_jobs_chosen
-- In place of job_cancel's {chosen} (jobs.sql): the workflow's jobs.
id IN (SELECT id FROM jobs INDEXED BY jobs_workflow WHERE workflow_id = :workflow_id)

-- name: workflow_retryable
-- The workflow's jobs that ended failed, dead or cancelled on their own: a
-- retry of them revives those that their ends cancelled.
SELECT id FROM jobs INDEXED BY jobs_workflow
WHERE workflow_id = :workflow_id
    AND state IN ('failed', 'dead', 'cancelled') AND cancelled_by IS NULL
ORDER BY id
