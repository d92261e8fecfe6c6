-- The first schema of taskq: jobs and the queues they live in.
-- Times are unix seconds (REAL) from the store's clock.

CREATE TABLE queues (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    created_at REAL NOT NULL
);

CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
    priority INTEGER NOT NULL DEFAULT 0,
    run_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    idempotency_key TEXT UNIQUE,
    created_at REAL NOT NULL
);

CREATE INDEX jobs_claimable ON jobs (queue, priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobs_queue_state ON jobs (queue, state);
