-- A job's relatives: how its parents ended, and its parents, children, spawner
-- and spawned jobs (taskq/broker/ops/relatives.py).

-- name: job_parent_results
SELECT edge.position, parent.id, parent.state, parent.result, parent.error
FROM job_parents AS edge JOIN jobs AS parent ON parent.id = edge.parent_id
WHERE edge.child_id = :job_id AND edge.position > :after_position
ORDER BY edge.position
LIMIT :limit

-- name: job_relatives
-- Each side in its order (rank): parents by position, children by id, the
-- job that spawned this one, and the jobs it spawned by id (workflow_edges,
-- workflows.sql, says how a spawned job's key names its spawn). A spawner that is also a
-- parent, and a spawned job that is also a child, are listed as such only.
SELECT * FROM (
    SELECT 'parent' AS side, edge.position AS rank, parent.id, parent.state
    FROM job_parents AS edge JOIN jobs AS parent ON parent.id = edge.parent_id
    WHERE edge.child_id = :job_id
    ORDER BY edge.position
    LIMIT :limit
)
UNION ALL
SELECT * FROM (
    SELECT 'child' AS side, child.id AS rank, child.id, child.state
    FROM job_parents AS edge JOIN jobs AS child ON child.id = edge.child_id
    WHERE edge.parent_id = :job_id
    ORDER BY edge.child_id
    LIMIT :limit
)
UNION ALL
SELECT 'spawner' AS side, 0 AS rank, spawner.id, spawner.state
FROM jobs AS job
JOIN executions AS attempt
    ON attempt.lease_token = substr(job.idempotency_key, 7, instr(job.idempotency_key, '/') - 7)
JOIN jobs AS spawner ON spawner.id = attempt.job_id
WHERE job.id = :job_id AND job.idempotency_key LIKE 'spawn:%/%'
    AND NOT EXISTS (
        SELECT 1 FROM job_parents WHERE child_id = :job_id AND parent_id = spawner.id
    )
UNION ALL
SELECT * FROM (
    SELECT 'spawned' AS side, spawned.id AS rank, spawned.id, spawned.state
    FROM executions AS attempt INDEXED BY executions_job
    JOIN jobs AS spawned
        ON spawned.idempotency_key > 'spawn:' || attempt.lease_token || '/'
        AND spawned.idempotency_key < 'spawn:' || attempt.lease_token || '0'
    WHERE attempt.job_id = :job_id
        AND NOT EXISTS (
            SELECT 1 FROM job_parents WHERE child_id = spawned.id AND parent_id = :job_id
        )
    ORDER BY spawned.id
    LIMIT :limit
)
