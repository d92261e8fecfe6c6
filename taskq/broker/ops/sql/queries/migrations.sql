-- The record of applied migrations (taskq/broker/ops/migrations.py).

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS taskq_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
)

-- name: migration_list
SELECT version, name, applied_at FROM taskq_migrations ORDER BY version

-- name: migration_record
INSERT INTO taskq_migrations (version, name, applied_at)
VALUES (:version, :name, (julianday('now') - 2440587.5) * 86400.0)
