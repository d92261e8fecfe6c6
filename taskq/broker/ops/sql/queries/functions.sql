-- Declared jobs: what workers publish of their --modules, and which live
-- workers serve them (taskq/broker/ops/functions.py).
--
-- A worker is live while it is active or draining and its last heartbeat is
-- at most :live_seconds old on the store's clock, which every write (a
-- heartbeat too) moves forward.

-- name: function_servers_forget
DELETE FROM function_servers WHERE worker_id = :worker_id

-- A version seen again keeps when it first appeared: that is what orders
-- versions, so a restarted old worker does not make its old declaration new.
-- name: function_version_publish
INSERT INTO function_versions (
    name, fingerprint, declaration, first_published_at, published_at, published_by
)
VALUES (
    :name, :fingerprint, :declaration, (SELECT now FROM taskq_clock),
    (SELECT now FROM taskq_clock), :worker_id
)
ON CONFLICT (name, fingerprint) DO UPDATE SET
    published_at = excluded.published_at, published_by = excluded.published_by

-- name: function_server_add
INSERT INTO function_servers (worker_id, name, fingerprint)
VALUES (:worker_id, :name, :fingerprint)
ON CONFLICT (worker_id, name) DO UPDATE SET fingerprint = excluded.fingerprint

-- Rows of workers known to be gone; a worker not yet registered keeps its own.
-- name: function_servers_prune
DELETE FROM function_servers
WHERE worker_id IN (SELECT id FROM workers WHERE state IN ('stopped', 'lost'))

-- Every version of one name (:name) or of all (NULL), the one submits use
-- first: served by a live worker, then the newest to appear. Served as
-- function_live_servers says: a worker that declares a version but leaves its
-- queue to others would not run a job submitted by it. Two versions first
-- published within one tick of the clock (86 ms on rqlite) are told apart by
-- their rowid, which grows with each version stored.
-- name: function_versions
SELECT
    v.name, v.fingerprint, v.declaration, v.first_published_at, v.published_at,
    v.published_by,
    EXISTS (
        SELECT 1 FROM function_servers AS s JOIN workers AS w ON w.id = s.worker_id
        WHERE s.name = v.name AND s.fingerprint = v.fingerprint AND {worker_serves_version}
    ) AS live
FROM function_versions AS v
WHERE :name IS NULL OR v.name = :name
ORDER BY v.name, live DESC, v.first_published_at DESC, v.rowid DESC

-- name: function_live_servers
SELECT s.name, s.fingerprint, w.id AS worker_id
FROM function_servers AS s
JOIN workers AS w ON w.id = s.worker_id
JOIN function_versions AS v ON v.name = s.name AND v.fingerprint = s.fingerprint
WHERE {worker_serves_version}
ORDER BY s.name, w.id

-- In place of {worker_serves_version}: whether worker w, which declares
-- version v, serves it. A live worker serves a declared job when a claim of
-- its would take the job: it takes the queue the version names ('default'
-- when none) and has every label that version needs. A worker's modules may
-- declare jobs of queues it leaves to others, and counting it there would
-- promise a claim.
-- name: worker_serves_version
(w.state IN ('active', 'draining')
    AND w.heartbeat_at >= (SELECT now FROM taskq_clock) - :live_seconds
    AND EXISTS (
        SELECT 1 FROM json_each(w.queues) AS q
        WHERE q.value = COALESCE(json_extract(v.declaration, '$.options.queue'), 'default')
    )
    AND NOT EXISTS (
        SELECT 1
        FROM json_each(COALESCE(json_extract(v.declaration, '$.options.labels'), '[]')) AS needed
        WHERE needed.value NOT IN (SELECT value FROM json_each(w.labels))
    ))

-- The queues some live worker takes jobs from.
-- name: queue_served_list
SELECT DISTINCT q.value AS queue
FROM workers AS w, json_each(w.queues) AS q
WHERE w.state IN ('active', 'draining')
    AND w.heartbeat_at >= (SELECT now FROM taskq_clock) - :live_seconds
ORDER BY q.value
