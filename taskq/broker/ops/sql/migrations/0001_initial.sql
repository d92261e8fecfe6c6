-- The first schema of taskq.
-- Times are unix seconds (REAL) from the store's clock, read from the one row
-- of taskq_clock (see queries.sql for why).

CREATE TABLE taskq_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    now REAL NOT NULL
);

INSERT INTO taskq_clock (id, now) VALUES (1, 0);

CREATE TABLE queues (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    updated_at REAL NOT NULL
);

CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('call', 'python_exec', 'shell')),
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
    priority INTEGER NOT NULL DEFAULT 0,
    run_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    timeout REAL,
    limits TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '[]',
    idempotency_key TEXT NOT NULL UNIQUE,
    submitter TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    worker_id TEXT,
    lease_token TEXT,
    lease_until REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    progress REAL,
    progress_message TEXT,
    result TEXT,
    error TEXT,
    CHECK (attempts <= max_attempts)
);

-- Claim: the next queued jobs of a queue in claim order, without a sort.
CREATE INDEX jobs_claimable ON jobs (queue, priority DESC, run_at, id) WHERE state = 'queued';
-- Requeue of expired leases and the heartbeat of one worker's jobs.
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE state = 'running';
CREATE INDEX jobs_running_worker ON jobs (worker_id) WHERE state = 'running';
-- Counts per queue and state, listings by state or submitter (keyset on id).
CREATE INDEX jobs_queue_state ON jobs (queue, state);
CREATE INDEX jobs_state_id ON jobs (state, id);
CREATE INDEX jobs_submitter_id ON jobs (submitter, id);
-- Pruning of finished jobs past their retention.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE executions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    worker_id TEXT NOT NULL,
    lease_token TEXT NOT NULL UNIQUE,
    started_at REAL NOT NULL,
    finished_at REAL,
    outcome TEXT,
    exit_code INTEGER,
    signal INTEGER,
    peak_rss_bytes INTEGER,
    cpu_seconds REAL,
    log_tail TEXT,
    error TEXT
);

CREATE INDEX executions_job ON executions (job_id, id);
CREATE INDEX executions_worker ON executions (worker_id, id);
CREATE INDEX executions_finished ON executions (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    queues TEXT NOT NULL,
    labels TEXT NOT NULL DEFAULT '[]',
    slots INTEGER NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'active'
        CHECK (state IN ('active', 'draining', 'stopped', 'lost')),
    started_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);

CREATE INDEX workers_state ON workers (state, heartbeat_at);

CREATE TABLE leader (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);

-- Counts per queue and state, kept by triggers so that reading them costs the
-- same with a thousand jobs as with a million.
CREATE TABLE job_counts (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_counts (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs
WHEN old.state IS NOT new.state
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO job_counts (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;
