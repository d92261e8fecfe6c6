-- Indexes the hot path (claim, then report) no longer pays for.
--
-- A job changes state twice on its way through a worker. A full index on
-- (state, id) moved every job twice, and without statistics the planner also
-- chose it for the reports and heartbeats, reading every running job instead
-- of the reported ones by id. (queue, state) served no query: counts per
-- queue and state come from job_counts. Listing by state now uses one index
-- per kind of state: the running ones by jobs_running_worker, the succeeded
-- ones by an index that takes each job once, as it finishes, and the rest,
-- which a busy worker never touches past the claim, by the (state, id) index.

DROP INDEX jobs_queue_state;
DROP INDEX jobs_state_id;
CREATE INDEX jobs_state_id ON jobs (state, id) WHERE state NOT IN ('running', 'succeeded');
CREATE INDEX jobs_succeeded_id ON jobs (id) WHERE state = 'succeeded';
