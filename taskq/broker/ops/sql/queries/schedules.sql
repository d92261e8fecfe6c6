-- Periodic jobs: their rows and their firing (taskq/broker/ops/schedules.py).

-- name: schedule_replace
-- Only when asked to; the schedule keeps its pause and its last tick.
UPDATE schedules SET
    cron = :cron, every_seconds = :every_seconds, timezone = :timezone, spec = :spec,
    catch_up = :catch_up, next_fire_at = :next_fire_at, created_at = (SELECT now FROM taskq_clock)
WHERE name = :name
RETURNING *

-- name: schedule_insert
-- A name already taken (or just replaced, in the same batch) is left alone.
INSERT INTO schedules (
    name, cron, every_seconds, timezone, spec, paused, catch_up, next_fire_at, created_at
)
VALUES (
    :name, :cron, :every_seconds, :timezone, :spec, 0, :catch_up, :next_fire_at,
    (SELECT now FROM taskq_clock)
)
ON CONFLICT (name) DO NOTHING
RETURNING *

-- name: schedule_get
SELECT * FROM schedules WHERE name = :name

-- name: schedule_delete
DELETE FROM schedules WHERE name = :name RETURNING name

-- name: schedule_fires_forget
DELETE FROM schedule_fires WHERE schedule = :name

-- name: schedule_set_paused
UPDATE schedules SET paused = :paused WHERE name = :name RETURNING name

-- name: schedule_list
SELECT * FROM schedules ORDER BY name

-- name: schedule_due
SELECT * FROM schedules WHERE paused = 0 AND next_fire_at <= :now
ORDER BY next_fire_at, name LIMIT :limit

-- name: schedule_fire_record
INSERT INTO schedule_fires (schedule, fire_at) VALUES (:name, :fire_at)
ON CONFLICT (schedule, fire_at) DO NOTHING

-- name: schedule_fire_spec
-- The specs for job_insert: the tick's job, only from the batch that recorded
-- the tick (job_id still NULL).
SELECT json_set(
    s.spec, '$.run_at', f.fire_at, '$.key', :key, '$.submitter', 'schedule:' || s.name
) AS spec
FROM schedule_fires AS f JOIN schedules AS s ON s.name = f.schedule
WHERE f.schedule = :name AND f.fire_at = :fire_at AND f.job_id IS NULL

-- name: schedule_fire_link
UPDATE schedule_fires SET job_id = (SELECT id FROM jobs WHERE idempotency_key = :key)
WHERE schedule = :name AND fire_at = :fire_at AND job_id IS NULL
RETURNING job_id

-- name: schedule_advance
UPDATE schedules SET
    next_fire_at = :next_fire_at,
    last_fired_at = COALESCE(:fired_at, last_fired_at)
WHERE name = :name AND next_fire_at < :next_fire_at
