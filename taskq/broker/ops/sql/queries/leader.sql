-- The leader lease that one maintenance process holds at a time (taskq/broker/ops/leader.py).

-- name: leader_attempt_elect
INSERT INTO leader (name, holder, expires_at)
VALUES (:name, :holder, (SELECT now FROM taskq_clock) + :ttl_seconds)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE leader.holder = excluded.holder OR leader.expires_at < (SELECT now FROM taskq_clock)
RETURNING holder

-- name: leader_open
SELECT NOT EXISTS (
    SELECT 1 FROM leader
    WHERE name = :name AND holder <> :holder
        AND expires_at >= COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0)
) AS open

-- name: leader_resign
DELETE FROM leader WHERE name = :name AND holder = :holder
