-- Claims: who gets which jobs, under a new lease (taskq/broker/ops/claims.py).

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
RETURNING id, kind, payload, queue, attempts, max_attempts, timeout, limits, lease_token, lease_until, retry, checkpoint, parent_count, has_children, {first_parents}

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
    retry, checkpoint, parent_count, has_children, {first_parents}
FROM jobs
WHERE state = 'running' AND worker_id = :worker_id
    AND lease_token > :claim_token || '.' AND lease_token < :claim_token || '/'
ORDER BY priority DESC, run_at, id

-- name: job_claim_first_parents
-- In place of {first_parents} in what a claim returns: for a job with parents,
-- how its first ones ended, as a JSON array of [position, id, state, result,
-- error], so that a fan-in starts without a read of its own. Result and error
-- go as the JSON values they are stored as, so that the worker decodes the
-- array once, not each parent's twice. At most :first_parents_count of them,
-- and only while their results and errors add up to at most
-- :first_parents_bytes: a claim never carries a large page. The first
-- parents' sizes are added up first, and the running sum (a window, which
-- took half of this for 50 parents) is taken only when they pass the budget.
-- The worker reads the rest, if any, by job_parent_results (workflows.sql); it
-- knows there are more when fewer came than parent_count says. NULL for a job
-- without parents, for which nothing here is evaluated. One line: it goes
-- into the claim's RETURNING clause. The parents' subquery is written out
-- twice because a WITH here made rqlite's claims return no rows (tried).
CASE WHEN parent_count > 0 THEN (SELECT CASE WHEN sum(first.bytes) <= :first_parents_bytes THEN json_group_array(json_array(first.position, first.id, first.state, json(first.result), json(first.error))) ELSE (SELECT json_group_array(json_array(capped.position, capped.id, capped.state, json(capped.result), json(capped.error))) FROM (SELECT edge.position, parent.id, parent.state, parent.result, parent.error, sum(coalesce(length(parent.result), 0) + coalesce(length(parent.error), 0)) OVER (ORDER BY edge.position) AS bytes_so_far FROM job_parents AS edge JOIN jobs AS parent ON parent.id = edge.parent_id WHERE edge.child_id = jobs.id ORDER BY edge.position LIMIT :first_parents_count) AS capped WHERE capped.bytes_so_far <= :first_parents_bytes ORDER BY capped.position) END FROM (SELECT edge.position, parent.id, parent.state, parent.result, parent.error, coalesce(length(parent.result), 0) + coalesce(length(parent.error), 0) AS bytes FROM job_parents AS edge JOIN jobs AS parent ON parent.id = edge.parent_id WHERE edge.child_id = jobs.id ORDER BY edge.position LIMIT :first_parents_count) AS first) END AS first_parents
