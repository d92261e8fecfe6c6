-- Jobs that run after other jobs (taskq/broker/ops/dependencies.py): their
-- edges and counters, and the statements that settle them at the end of
-- every write that ends, reopens or adds a job with parents.
--
-- A job with parents waits ('waiting') until every parent has ended. The
-- triggers jobs_parent_ended and jobs_parent_reopened (schema.sql) keep each
-- waiting child's parents_left and parents_failed in step with its parents'
-- states, in the statement that changes a parent. What that leaves to do is
-- done by job_cascade_cancel and then job_release_ready, appended to the
-- same write: neither a scan nor a later tick, and both only read the
-- partial indexes jobs_doomed and jobs_releasable, which are empty between
-- writes.

-- name: job_parents_insert
-- :edges is a JSON array of [child key, position, parent key, parent id]:
-- each child is found by its idempotency key (every job has one), its parent
-- by key when the parent is new in the same write, else by id, and only
-- within the child's own workflow (or none, if the child is in none). A
-- parent not found leaves parent_id NULL, which fails the whole write. A
-- resent write finds its edges in place and writes none again (not even
-- looked up: its parent may have joined a workflow since, by a fan-out).
INSERT INTO job_parents (child_id, position, parent_id)
SELECT
    child.id,
    edge.value ->> '$[1]',
    CASE
        WHEN edge.value ->> '$[2]' IS NOT NULL
        THEN (SELECT id FROM jobs WHERE idempotency_key = edge.value ->> '$[2]')
        ELSE (
            SELECT parent.id FROM jobs AS parent
            WHERE parent.id = edge.value ->> '$[3]' AND parent.workflow_id IS child.workflow_id
        )
    END
FROM json_each(:edges) AS edge
JOIN jobs AS child ON child.idempotency_key = edge.value ->> '$[0]'
WHERE NOT EXISTS (
    SELECT 1 FROM job_parents AS stored
    WHERE stored.child_id = child.id AND stored.position = edge.value ->> '$[1]'
)

-- name: job_parents_insert_positional
-- The same for a workflow's jobs, which are keyed by position (the workflow's
-- key :key_prefix, a slash, the job's position in the request: see
-- enqueue.sql's job_insert_positional_identity). :edges has an item per job
-- with parents, [its position, how many of its parents are stored, [its
-- parents in declared order: the stored ones' ids, then the others'
-- positions in the request]]: a few bytes an edge where job_parents_insert
-- takes two keys (for a fan-in of 10,000, 50 KB instead of a megabyte to
-- send, replicate and parse). Each item's list of parents is read out once,
-- into child: read from the item on every edge, the whole list would be
-- written out and parsed again each time. Parents are found, and resends
-- write nothing again, as in job_parents_insert.
WITH child (id, workflow_id, stored, parents) AS MATERIALIZED (
    SELECT job.id, job.workflow_id, item.value ->> '$[1]', item.value ->> '$[2]'
    FROM json_each(:edges) AS item
    JOIN jobs AS job ON job.idempotency_key = :key_prefix || '/' || (item.value ->> '$[0]')
)
INSERT INTO job_parents (child_id, position, parent_id)
SELECT child.id, parent.key, CASE
    WHEN parent.key < child.stored THEN (
        SELECT stored.id FROM jobs AS stored
        WHERE stored.id = parent.value AND stored.workflow_id IS child.workflow_id
    )
    ELSE (SELECT id FROM jobs WHERE idempotency_key = :key_prefix || '/' || parent.value)
END
FROM child JOIN json_each(child.parents) AS parent
WHERE NOT EXISTS (
    SELECT 1 FROM job_parents AS edge WHERE edge.child_id = child.id AND edge.position = parent.key
)

-- name: job_parents_flag
-- Stored jobs named as parents by the jobs just written have children: from
-- now on their state changes fire the counting triggers. (Parents written in
-- the same request are flagged by their INSERT.) Only those that got an edge:
-- a fan-out whose report was refused (its lease moved on) wrote none, and
-- leaves the job it named as it was.
UPDATE jobs SET has_children = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_children = 0
    AND EXISTS (SELECT 1 FROM job_parents AS edge WHERE edge.parent_id = jobs.id)

-- name: job_parents_recount
-- A waiting job's counters from its parents' states as they are now: for jobs
-- just written (a parent may have ended already) and for jobs that wait again
-- (revived, or retried by hand). {chosen} says which jobs. cancelled_by, the
-- mark of a revived job, goes, and so does the error a cascade left (which no
-- longer holds: a job that waits again has not been cancelled); an error of its
-- own, from an attempt, stays.
UPDATE jobs SET
    (parents_left, parents_failed) = (
        SELECT
            count(*) FILTER (
                WHERE parent.state NOT IN ('succeeded', 'failed', 'dead', 'cancelled')
            ),
            count(*) FILTER (WHERE parent.state IN ('failed', 'dead', 'cancelled'))
        FROM job_parents AS edge JOIN jobs AS parent ON parent.id = edge.parent_id
        WHERE edge.child_id = jobs.id
    ),
    cancelled_by = NULL,
    error = CASE WHEN json_valid(error) AND error ->> '$.type' = 'ParentFailed'
        THEN NULL ELSE error END
WHERE state = 'waiting' AND {chosen}

-- name: job_parents_recount_by_key
-- In place of job_parents_recount's {chosen}: the jobs just written.
idempotency_key IN (SELECT value FROM json_each(:keys))

-- name: job_parents_recount_by_position
-- In place of job_parents_recount's {chosen}: the jobs at :positions of a
-- workflow's request (keyed as job_parents_insert_positional says).
idempotency_key IN (SELECT :key_prefix || '/' || value FROM json_each(:positions))

-- name: job_parents_recount_revived
-- In place of job_parents_recount's {chosen}: the jobs job_revive brought back
-- (marked by their cancelled_by) and those retried by hand (:ids).
id IN (
    SELECT id FROM jobs INDEXED BY jobs_cancelled_by
    WHERE cancelled_by IS NOT NULL AND state = 'waiting'
    UNION ALL
    SELECT value FROM json_each(:ids)
)

-- name: job_cascade_cancel
-- Every waiting job that a parent's failure dooms (not run_anyway, a parent
-- ended failed, dead or cancelled), and every waiting descendant of one that
-- is not run_anyway, ends cancelled, naming the parent that cancelled it: for
-- a doomed job its first such parent by id, for a descendant the cancelled
-- job it descends through. Each names the cause as well: the job whose own
-- end began the cascade (carried down from a parent an earlier cascade
-- cancelled, by its error's cause), so that a job deep in a pipeline says
-- which step failed without a walk up the tree. The walk starts from
-- jobs_doomed, which holds only the jobs that this write's ends doomed, so it
-- touches no other job, and goes only down edges: it ends. Being a statement
-- of its own (not a trigger), each job it cancels fires jobs_parent_ended,
-- which counts the cancel in the run_anyway children, for job_release_ready next.
WITH RECURSIVE doomed (id, parent, parent_state, cause, cause_state) AS (
    -- A parent an earlier cascade cancelled (cancelled_by set) hands on its error's cause;
    -- any other is the cause, whatever error an earlier cascade left on it.
    SELECT child.id, failed.id, failed.state,
        CASE WHEN failed.cancelled_by IS NOT NULL AND json_valid(failed.error)
            AND failed.error ->> '$.cause' > 0
        THEN failed.error ->> '$.cause' ELSE failed.id END,
        CASE WHEN failed.cancelled_by IS NOT NULL AND json_valid(failed.error)
            AND failed.error ->> '$.cause' > 0
        THEN failed.error ->> '$.cause_state' ELSE failed.state END
    FROM jobs AS child INDEXED BY jobs_doomed
    JOIN jobs AS failed ON failed.id = (
        SELECT min(edge.parent_id) FROM job_parents AS edge
        JOIN jobs AS parent ON parent.id = edge.parent_id
        WHERE edge.child_id = child.id AND parent.state IN ('failed', 'dead', 'cancelled')
    )
    WHERE child.state = 'waiting' AND child.parents_failed > 0 AND child.run_anyway = 0
    UNION
    SELECT edge.child_id, doomed.id, 'cancelled', doomed.cause, doomed.cause_state
    FROM doomed
    JOIN job_parents AS edge ON edge.parent_id = doomed.id
    JOIN jobs AS child ON child.id = edge.child_id
    WHERE child.state = 'waiting' AND child.run_anyway = 0
)
UPDATE jobs SET
    state = 'cancelled',
    finished_at = (SELECT now FROM taskq_clock),
    cancelled_by = cause.parent,
    error = json_object(
        'type', 'ParentFailed',
        'message', 'parent job ' || cause.parent || ' ended ' || cause.parent_state
            || CASE WHEN cause.cause = cause.parent THEN ''
                ELSE ', as job ' || cause.cause || ' ended ' || cause.cause_state END,
        'parent', cause.parent,
        'cause', cause.cause,
        'cause_state', cause.cause_state
    )
-- A job reached from several parents is cancelled once, by the lowest; SQLite
-- takes the bare columns (parent_state, cause...) from the row that min() picked.
FROM (
    SELECT id, min(parent) AS parent, parent_state, cause, cause_state FROM doomed GROUP BY id
) AS cause
WHERE jobs.id = cause.id

-- name: job_release_ready
-- Waiting jobs whose parents have all ended, and which a failed parent did
-- not doom, are queued: due now, or later if they were submitted with a delay.
-- Each is returned, so that a worker whose report released it can tell the
-- idle workers of its queue on a cluster (taskq/worker/claim_requests.py);
-- the time comes from the clock row, so rqlite keeps the rows.
UPDATE jobs INDEXED BY jobs_releasable SET
    state = 'queued',
    run_at = max(run_at, (SELECT now FROM taskq_clock))
WHERE state = 'waiting' AND parents_left = 0 AND (parents_failed = 0 OR run_anyway = 1)
RETURNING id, queue

-- name: job_revive
-- The jobs a parent's failure cancelled wait again once that parent waits or
-- runs again (a retry of it), and so do the jobs cancelled through them:
-- cancelled_by stays, to mark them for job_parents_recount next. Their ids are
-- returned for a retry's count of the jobs it moved.
WITH RECURSIVE revived (id) AS (
    SELECT child.id
    FROM json_each(:ids) AS retried
    JOIN jobs AS child INDEXED BY jobs_cancelled_by ON child.cancelled_by = retried.value
    WHERE child.state = 'cancelled'
        AND (SELECT state FROM jobs WHERE id = retried.value)
            NOT IN ('succeeded', 'failed', 'dead', 'cancelled')
    UNION
    SELECT child.id
    FROM revived JOIN jobs AS child INDEXED BY jobs_cancelled_by ON child.cancelled_by = revived.id
    WHERE child.state = 'cancelled'
)
UPDATE jobs SET state = 'waiting', finished_at = NULL, error = NULL
WHERE id IN (SELECT id FROM revived)
RETURNING id

-- name: job_parent_workflows
-- The stored jobs an enqueue or a workflow names as parents, with their workflows.
SELECT id, workflow_id FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))
