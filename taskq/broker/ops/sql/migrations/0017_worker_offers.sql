-- An idle worker's offer to take the next job that fits it (ops/offers.py):
-- the write that readies a job fills it, so that the worker only reads what it
-- was given, where it would otherwise write a claim of its own. One offer a
-- worker at most; ``token`` is the lease token's stem of the job it takes.
-- Filled only while ``fresh_until`` lies ahead: the worker's heartbeats move it.
-- A job handed to one is the worker's only once it is taken: its first
-- heartbeat or report under the lease clears the job's ``handed_until``; one
-- not taken by then (its worker frozen or gone) goes back to its queue,
-- the attempt not counted (maintenance's job_requeue_untaken).

CREATE TABLE worker_offers (
    worker_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    queues TEXT NOT NULL,
    labels TEXT NOT NULL,
    lease_seconds REAL NOT NULL,
    offered_at REAL NOT NULL,
    fresh_until REAL NOT NULL,
    take_seconds REAL NOT NULL
);

ALTER TABLE jobs ADD COLUMN handed_until REAL;
