-- Periodic jobs, and limits enforced in the store across all workers and clients.

CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    cron TEXT,
    every_seconds REAL CHECK (every_seconds IS NULL OR every_seconds > 0),
    timezone TEXT NOT NULL DEFAULT 'UTC',
    spec TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    catch_up TEXT NOT NULL DEFAULT 'once' CHECK (catch_up IN ('once', 'skip')),
    next_fire_at REAL NOT NULL,
    last_fired_at REAL,
    created_at REAL NOT NULL,
    CHECK ((cron IS NULL) <> (every_seconds IS NULL))
);

CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0;

-- One row per tick that fired: its primary key is what makes a tick fire
-- exactly once, however many schedulers run.
CREATE TABLE schedule_fires (
    schedule TEXT NOT NULL,
    fire_at REAL NOT NULL,
    job_id INTEGER,
    PRIMARY KEY (schedule, fire_at)
);

-- Per-queue limits: at most max_running jobs running cluster-wide, and at
-- most rate_limit starts per rate_period seconds (a token bucket).
ALTER TABLE queues ADD COLUMN max_running INTEGER CHECK (max_running IS NULL OR max_running >= 0);
ALTER TABLE queues ADD COLUMN rate_limit REAL CHECK (rate_limit IS NULL OR rate_limit > 0);
ALTER TABLE queues ADD COLUMN rate_period REAL CHECK (rate_period IS NULL OR rate_period > 0);
ALTER TABLE queues ADD COLUMN rate_tokens REAL;
ALTER TABLE queues ADD COLUMN rate_updated_at REAL;

-- Submission rates per submitter ('*' applies to everyone without a row of
-- their own), and each submitter's token bucket. The CHECK turns an
-- over-limit enqueue into a constraint error that rolls the batch back.
CREATE TABLE submit_limits (
    submitter TEXT PRIMARY KEY,
    rate REAL NOT NULL CHECK (rate > 0),
    period REAL NOT NULL CHECK (period > 0)
);

CREATE TABLE submit_buckets (
    submitter TEXT PRIMARY KEY,
    tokens REAL NOT NULL CHECK (tokens >= 0),
    updated_at REAL NOT NULL
);
