-- The store's retention of finished jobs (taskq/broker/ops/retention.py),
-- one row; maintenance.sql's prunes read it.

-- name: retention_get
SELECT succeeded_seconds, failed_seconds FROM retention

-- name: retention_set
-- :set_succeeded and :set_failed say which figures change (NULL for a
-- figure: kept until pruned by hand).
UPDATE retention SET
    succeeded_seconds = CASE WHEN :set_succeeded THEN :succeeded ELSE succeeded_seconds END,
    failed_seconds = CASE WHEN :set_failed THEN :failed ELSE failed_seconds END
RETURNING succeeded_seconds, failed_seconds
