-- An idempotency key stands for one request, as payment APIs have it: the
-- same request again returns the job the key names, and a different one is
-- refused instead of being answered with that job. Each job keeps a
-- fingerprint of its request (NULL for jobs stored before this, and for jobs
-- under a random key, which only a resend brings back).
--
-- The fingerprint of a job never changes: an enqueue that reuses a key for
-- another request tries to change it, and this trigger fails the statement,
-- so that its whole batch is rolled back. "constraint failed" makes the store
-- report it as a constraint violation, as it does a CHECK.

ALTER TABLE jobs ADD COLUMN request_fingerprint TEXT;

CREATE TRIGGER jobs_request_fingerprint_kept BEFORE UPDATE OF request_fingerprint ON jobs
BEGIN
    SELECT RAISE(ABORT, 'constraint failed: the idempotency key names another request');
END;
