-- Offers: an idle worker's standing claim of one job, filled by the write that
-- readies one (taskq/broker/ops/offers.py).

-- name: offer_refresh
-- With each heartbeat: an offer whose worker stopped beating goes stale.
UPDATE worker_offers SET fresh_until = (SELECT now FROM taskq_clock) + :fresh_seconds
WHERE worker_id = :worker_id

-- name: offer_fill
-- One of the jobs {candidates} names, ready now, to the oldest fresh offer of
-- an active worker it fits, under a lease as a claim gives one (job_claim in
-- claims.sql): the same columns, the lease token made of the offer's token.
-- "Fits" is the claim's rules for one job: a queue of the offer's, not
-- paused, under its max_running and with a whole token in its rate bucket,
-- and no label the worker lacks. {candidates} is a short list of ids (the
-- jobs the write just queued or released), so a fill costs the same beside a
-- million queued jobs. An offer that is filled already (a job runs under its
-- token) takes no other; the write drops it (offer_drop_filled). The job is
-- the worker's once taken (handed_until, cleared by its heartbeat or report).
UPDATE jobs SET
    state = 'running',
    attempts = attempts + 1,
    worker_id = pick.worker_id,
    lease_token = pick.token || '.' || jobs.id,
    lease_until = (SELECT now FROM taskq_clock) + pick.lease_seconds,
    claimed_at = (SELECT now FROM taskq_clock),
    started_at = (SELECT now FROM taskq_clock),
    cancel_requested = 0,
    progress = NULL,
    progress_message = NULL,
    handed_until = (SELECT now FROM taskq_clock) + pick.take_seconds
FROM (
    SELECT offer.worker_id, offer.token, offer.lease_seconds, offer.take_seconds, (
        SELECT candidate.id FROM jobs AS candidate
        WHERE candidate.id IN ({candidates})
            AND candidate.state = 'queued'
            AND candidate.run_at <= (SELECT now FROM taskq_clock)
            AND candidate.queue IN (SELECT value FROM json_each(offer.queues))
            AND NOT EXISTS (
                SELECT 1 FROM json_each(candidate.labels) AS needed
                WHERE needed.value NOT IN (SELECT value FROM json_each(offer.labels))
            )
            AND NOT EXISTS (
                SELECT 1 FROM queues
                WHERE queues.name = candidate.queue AND (
                    queues.paused = 1
                    OR queues.max_running <= COALESCE((
                        SELECT n FROM job_counts
                        WHERE queue = candidate.queue AND state = 'running'
                    ), 0)
                    OR (queues.rate_limit IS NOT NULL AND MIN(
                        queues.rate_limit,
                        COALESCE(queues.rate_tokens, queues.rate_limit)
                            + ((SELECT now FROM taskq_clock) - COALESCE(queues.rate_updated_at, 0))
                            * queues.rate_limit / queues.rate_period
                    ) < 1)
                )
            )
        ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
        LIMIT 1
    ) AS job_id
    FROM worker_offers AS offer
    JOIN workers ON workers.id = offer.worker_id AND workers.state = 'active'
    WHERE offer.fresh_until >= (SELECT now FROM taskq_clock)
        AND NOT EXISTS (
            SELECT 1 FROM jobs AS held
            WHERE held.state = 'running' AND held.worker_id = offer.worker_id
                AND held.lease_token > offer.token || '.'
                AND held.lease_token < offer.token || '/'
        )
    ORDER BY job_id IS NULL, offer.offered_at, offer.worker_id
    LIMIT 1
) AS pick
WHERE jobs.id = pick.job_id

-- name: offer_fill_executions
-- The filled job's execution row, as execution_start writes a claim's.
INSERT INTO executions (job_id, attempt, worker_id, lease_token, claimed_at, started_at)
SELECT jobs.id, jobs.attempts, jobs.worker_id, jobs.lease_token, jobs.claimed_at, jobs.started_at
FROM worker_offers AS offer
JOIN jobs ON jobs.state = 'running' AND jobs.worker_id = offer.worker_id
    AND jobs.lease_token > offer.token || '.' AND jobs.lease_token < offer.token || '/'

-- name: offer_fill_rate_spend
-- The filled job's start taken out of its queue's rate bucket, as
-- queue_rate_spend takes a claim's.
UPDATE queues SET
    rate_tokens = MIN(
        rate_limit,
        COALESCE(rate_tokens, rate_limit)
            + ((SELECT now FROM taskq_clock)
                - COALESCE(rate_updated_at, (SELECT now FROM taskq_clock)))
            * rate_limit / rate_period
    ) - 1,
    rate_updated_at = (SELECT now FROM taskq_clock)
WHERE rate_limit IS NOT NULL AND name IN (
    SELECT jobs.queue FROM worker_offers AS offer
    JOIN jobs ON jobs.state = 'running' AND jobs.worker_id = offer.worker_id
        AND jobs.lease_token > offer.token || '.' AND jobs.lease_token < offer.token || '/'
)

-- name: offer_drop_filled
DELETE FROM worker_offers WHERE EXISTS (
    SELECT 1 FROM jobs
    WHERE jobs.state = 'running' AND jobs.worker_id = worker_offers.worker_id
        AND jobs.lease_token > worker_offers.token || '.'
        AND jobs.lease_token < worker_offers.token || '/'
)
