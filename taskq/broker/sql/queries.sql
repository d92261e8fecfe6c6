-- Named queries of the broker. Each block is headed `-- name: <name>` and is
-- looked up by that name. Times are unix seconds as REAL, taken from the
-- store's clock: julianday('now') is rewritten by the rqlite node that
-- receives the write, so every replica stores the same value.

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
