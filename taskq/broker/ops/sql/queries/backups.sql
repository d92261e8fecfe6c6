-- What a backup file, or a store to restore into, holds (taskq/broker/ops/backups.py).

-- name: backup_tables
SELECT name FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
ORDER BY name

-- A whole-file check: every page, index and constraint. One row 'ok' when sound.
-- name: backup_integrity_check
PRAGMA integrity_check

-- Counted from the jobs themselves, not from job_counts: a summary that
-- does not lean on the triggers' bookkeeping it may be used to check.
-- name: backup_jobs_by_state
SELECT state, count(*) AS n FROM jobs GROUP BY state ORDER BY state

-- name: backup_workers_registered
SELECT count(*) AS n FROM workers WHERE state != 'stopped'

-- A restored store is served by none of the source's workers until one is
-- heard on it: those the copy lists as live are lost until then (a heartbeat
-- makes a worker live again), so that no queue counts as served by them.
-- name: restore_workers_lost
UPDATE workers SET state = 'lost' WHERE state IN ('active', 'draining')
