-- Retry policies, checkpoints and per-queue job defaults.
--
-- jobs.retry is the job's retry policy as JSON (taskq.RetryPolicy), chosen at
-- enqueue from the job's own or its queue's default; NULL is the default
-- policy. jobs.checkpoint is the JSON value the job's attempts last saved
-- (taskq.current_job().checkpoint), which the next attempt reads to resume.
-- queues.job_defaults holds the timeout, max_attempts, limits and retry a job
-- of the queue gets when it says none, as a JSON object.

ALTER TABLE jobs ADD COLUMN retry TEXT;

ALTER TABLE jobs ADD COLUMN checkpoint TEXT;

ALTER TABLE queues ADD COLUMN job_defaults TEXT;
