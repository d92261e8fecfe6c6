-- Live output of running attempts, and reading it back (taskq/broker/ops/output.py).

-- Chunks arrive as one JSON array, each row fenced by its own lease: its
-- attempt is the execution of that lease token, and only while the job still
-- runs under it. A chunk already stored (a write sent again after an unknown
-- outcome, or sent by a flush and then again with the attempt's report) is
-- ignored.
-- name: output_append
INSERT OR IGNORE INTO job_output (execution_id, at_byte, size, data)
SELECT executions.id, chunk.value ->> '$.at', chunk.value ->> '$.size', chunk.value ->> '$.data'
FROM json_each(:chunks) AS chunk
JOIN executions ON executions.lease_token = chunk.value ->> '$.token'
JOIN jobs ON jobs.id = executions.job_id
    AND jobs.lease_token = executions.lease_token AND jobs.state = 'running'

-- Where each attempt's output ends now, fenced as the chunks are. (A
-- report's batch leaves it out: execution_finish records the end.)
-- name: output_account
UPDATE executions SET output_bytes = MAX(output_bytes, attempt.value ->> '$.end')
FROM json_each(:attempts) AS attempt
WHERE executions.lease_token = attempt.value ->> '$.token'
    AND EXISTS (
        SELECT 1 FROM jobs
        WHERE jobs.id = executions.job_id
            AND jobs.lease_token = executions.lease_token AND jobs.state = 'running'
    )

-- Each attempt keeps its last 'keep' bytes at most: a chunk that starts
-- before them goes whole. An attempt's writes end further on each time, so
-- the 'end' this one brings is where its output ends.
-- name: output_trim
DELETE FROM job_output
WHERE rowid IN (
    SELECT job_output.rowid
    FROM json_each(:attempts) AS attempt
    JOIN executions ON executions.lease_token = attempt.value ->> '$.token'
    JOIN job_output ON job_output.execution_id = executions.id
        AND job_output.at_byte < (attempt.value ->> '$.end') - (attempt.value ->> '$.keep')
)

-- An attempt to read the output of, with its job's state and its output if
-- its report stored it inline (then it has no chunks); {attempt_id} is one of
-- the four blocks after this. No row: no such job; a row with no
-- execution id: no such attempt (yet). Its run counts the executions with
-- its number up to it: a release repeats the number for the next run, and a
-- follower's position names the run (executions_job finds them).
-- name: output_attempt
SELECT
    jobs.state AS job_state, jobs.error AS job_error,
    executions.id, executions.attempt, executions.finished_at, executions.outcome,
    executions.error, executions.output_bytes, executions.output_inline,
    (
        SELECT COUNT(*) FROM executions AS same
        WHERE same.job_id = jobs.id AND same.attempt = executions.attempt
            AND same.id <= executions.id
    ) AS run,
    EXISTS (
        SELECT 1 FROM executions AS later WHERE later.job_id = jobs.id AND later.id > executions.id
    ) AS later_attempts
FROM jobs
LEFT JOIN executions ON executions.id = ({attempt_id})
WHERE jobs.id = :job_id

-- The attempt numbered :attempt (the latest of that number: a release
-- repeats it), or with :attempt NULL the latest.
-- name: output_attempt_numbered
SELECT id FROM executions
WHERE job_id = jobs.id AND (:attempt IS NULL OR attempt = :attempt)
ORDER BY id DESC LIMIT 1

-- Run :run of the attempt numbered :attempt, counted from 1 as they ran: the
-- very run a follower was reading, whatever ran under that number since.
-- name: output_attempt_run
SELECT id FROM executions
WHERE job_id = jobs.id AND attempt = :attempt
ORDER BY id LIMIT 1 OFFSET :run - 1

-- The attempt after execution :after_id, for a follower that read that one to its end.
-- name: output_attempt_after
SELECT id FROM executions WHERE job_id = jobs.id AND id > :after_id ORDER BY id LIMIT 1

-- The attempt a follower reads, as it is now.
-- name: output_attempt_same
SELECT id FROM executions WHERE id = :execution_id AND job_id = jobs.id

-- The chunks of an attempt from byte :after on, oldest first: the one that
-- holds byte :after too (a chunk is at most :most_chunk_bytes long).
-- name: output_chunks
SELECT at_byte, size, data FROM job_output
WHERE execution_id = :execution_id
    AND at_byte > :after - :most_chunk_bytes AND at_byte + size > :after
ORDER BY at_byte
LIMIT :limit
