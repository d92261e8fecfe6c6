-- The whole schema of taskq as the migrations leave it (tests hold the two in step).
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
    updated_at REAL NOT NULL,
    max_running INTEGER CHECK (max_running IS NULL OR max_running >= 0),
    rate_limit REAL CHECK (rate_limit IS NULL OR rate_limit > 0),
    rate_period REAL CHECK (rate_period IS NULL OR rate_period > 0),
    rate_tokens REAL,
    rate_updated_at REAL,
    -- What a job of the queue gets when it says none: timeout, max_attempts,
    -- limits, retry, as a JSON object.
    job_defaults TEXT
);

CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('call', 'python_exec', 'shell')),
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('waiting', 'queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
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
    -- What the idempotency key stands for (see jobs_request_fingerprint_kept).
    request_fingerprint TEXT,
    -- The job's retry policy (taskq.RetryPolicy) as JSON; NULL: the default.
    retry TEXT,
    -- The JSON value its attempts last saved, for the next one to resume from.
    checkpoint TEXT,
    -- When its latest attempt was claimed; started_at is when that attempt's
    -- code started, once the attempt has reported (a job claimed ahead of a
    -- free slot waits for one in between).
    claimed_at REAL,
    -- The workflow it belongs to (NULL: a job on its own).
    workflow_id INTEGER,
    -- 1: it runs once its parents ended, whatever their outcome; 0: a parent
    -- that ends failed, dead or cancelled cancels it.
    run_anyway INTEGER NOT NULL DEFAULT 0 CHECK (run_anyway IN (0, 1)),
    -- How many parents it has (job_parents rows), how many of them have not
    -- ended, and how many ended other than succeeded: kept by the triggers
    -- jobs_parent_ended and jobs_parent_reopened while it is waiting.
    parent_count INTEGER NOT NULL DEFAULT 0,
    parents_left INTEGER NOT NULL DEFAULT 0,
    parents_failed INTEGER NOT NULL DEFAULT 0,
    -- The parent whose failure cancelled it: retrying that parent revives it.
    cancelled_by INTEGER,
    -- 1 once a job names it as a parent: only then do its state changes count
    -- in children (the triggers' WHEN reads it; a job's ends cost nothing more
    -- while it has none).
    has_children INTEGER NOT NULL DEFAULT 0,
    CHECK (attempts <= max_attempts)
);

-- Claim: the next queued jobs of a queue in claim order, without a sort.
CREATE INDEX jobs_claimable ON jobs (queue, priority DESC, run_at, id) WHERE state = 'queued';
-- Requeue of expired leases and the heartbeat of one worker's jobs.
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE state = 'running';
CREATE INDEX jobs_running_worker ON jobs (worker_id) WHERE state = 'running';
-- Listings by state or submitter (keyset on id). A job on the hot path, from
-- queued to running to succeeded, leaves one state index and enters another:
-- running jobs are listed by jobs_running_worker.
CREATE INDEX jobs_state_id ON jobs (state, id) WHERE state NOT IN ('running', 'succeeded');
CREATE INDEX jobs_succeeded_id ON jobs (id) WHERE state = 'succeeded';
CREATE INDEX jobs_submitter_id ON jobs (submitter, id);
-- Pruning of finished jobs past their retention.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
-- A workflow's jobs, for its counts and listings.
CREATE INDEX jobs_workflow ON jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
-- What the settling statements at the end of a write look for (workflows.sql):
-- waiting jobs whose parents have all ended, and waiting jobs that a failed
-- parent dooms. Both are empty between writes, so each costs a probe.
CREATE INDEX jobs_releasable ON jobs (id) WHERE state = 'waiting' AND parents_left = 0;
CREATE INDEX jobs_doomed ON jobs (id)
    WHERE state = 'waiting' AND parents_failed > 0 AND run_anyway = 0;
-- The jobs a parent's failure cancelled, which a retry of that parent revives.
CREATE INDEX jobs_cancelled_by ON jobs (cancelled_by) WHERE cancelled_by IS NOT NULL;

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
    error TEXT,
    claimed_at REAL,
    -- Where the attempt's output ends so far, dropped bytes included (see job_output).
    output_bytes INTEGER NOT NULL DEFAULT 0,
    -- All of the attempt's output (bytes 0 to output_bytes), when it was small and
    -- came all with the report; then it has no chunks in job_output.
    output_inline TEXT
);

CREATE INDEX executions_job ON executions (job_id, id);
CREATE INDEX executions_worker ON executions (worker_id, id);
CREATE INDEX executions_finished ON executions (finished_at) WHERE finished_at IS NOT NULL;

-- What each attempt writes to stdout and stderr (its logging records
-- included), in the chunks its worker sent while it ran: at_byte is where a
-- chunk starts among all the bytes the attempt wrote, size how many of them
-- it holds, data their text (bytes that are not UTF-8 replaced). A gap before
-- or between chunks is output dropped: the oldest past the attempt's cap, or
-- more than its worker would send in one write. Pruned with its attempt. An
-- attempt whose output is in executions.output_inline has no chunks here.
CREATE TABLE job_output (
    execution_id INTEGER NOT NULL,
    at_byte INTEGER NOT NULL CHECK (at_byte >= 0),
    size INTEGER NOT NULL CHECK (size > 0),
    data TEXT NOT NULL,
    UNIQUE (execution_id, at_byte)
);

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
    heartbeat_at REAL NOT NULL,
    max_slots INTEGER,
    wake_address TEXT,
    -- What it may run (taskq/broker/worker_policy.py) as JSON; NULL: a worker
    -- of a taskq that records none (ops/workers.py, job_served_elsewhere).
    policy TEXT
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

-- An idempotency key stands for one request: a job's fingerprint never
-- changes, so an enqueue that reuses a key for another request fails here,
-- with its whole batch. "constraint failed" makes the store report it as a
-- constraint violation, as it does a CHECK.
CREATE TRIGGER jobs_request_fingerprint_kept BEFORE UPDATE OF request_fingerprint ON jobs
BEGIN
    SELECT RAISE(ABORT, 'constraint failed: the idempotency key names another request');
END;

-- Workflows: jobs submitted together, some running after others. A workflow
-- key stands for one request, as a job's does (its fingerprint is kept by
-- workflows_request_fingerprint_kept).
CREATE TABLE workflows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL UNIQUE,
    request_fingerprint TEXT,
    submitter TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);

CREATE TRIGGER workflows_request_fingerprint_kept BEFORE UPDATE OF request_fingerprint ON workflows
BEGIN
    SELECT RAISE(ABORT, 'constraint failed: the idempotency key names another request');
END;

-- One row per dependency: child_id runs after parent_id, its parent number
-- position (from 0, in declared order). A parent that does not exist makes
-- parent_id NULL, which fails the write that names it.
CREATE TABLE job_parents (
    child_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    parent_id INTEGER NOT NULL,
    PRIMARY KEY (child_id, position)
) WITHOUT ROWID;

CREATE INDEX job_parents_parent ON job_parents (parent_id, child_id);

-- A child's counters follow its parents' ends, in the statement that ends
-- each parent, so that two parents ending at once on two workers count
-- twice and release their child once. Only waiting children count: a child
-- cancelled (or run) meanwhile has its counters recomputed if it ever waits
-- again. No trigger here changes a state, so none fires another (SQLite's
-- recursive_triggers is off; rqlite gives no way to turn it on).
--
-- Each firing must build no temporary b-tree (migration 0013 says why): the
-- states are compared one by one, not listed with IN, and a parent's first
-- child is found by a lookup. Most parents have one child; the *_more
-- triggers, which reach the others, fire only for a parent that has more.
--
-- They are triggers on finished_at, not on state (migration 0014 says why):
-- every statement that ends a job or takes it out of its end sets
-- finished_at, and the claim and the release, which only move a job between
-- open states, do not, so they are prepared without these triggers.
-- tests/unit/test_job_end_statements.py holds every statement to that.
CREATE TRIGGER jobs_parent_ended AFTER UPDATE OF finished_at ON jobs
WHEN new.has_children = 1
    AND old.state <> 'succeeded' AND old.state <> 'failed'
    AND old.state <> 'dead' AND old.state <> 'cancelled'
    AND (new.state = 'succeeded' OR new.state = 'failed'
        OR new.state = 'dead' OR new.state = 'cancelled')
BEGIN
    UPDATE jobs SET
        parents_left = parents_left - 1,
        parents_failed = parents_failed + (new.state <> 'succeeded')
    WHERE id = (SELECT min(child_id) FROM job_parents WHERE parent_id = new.id)
        AND state = 'waiting';
END;

CREATE TRIGGER jobs_parent_ended_more AFTER UPDATE OF finished_at ON jobs
WHEN new.has_children = 1
    AND old.state <> 'succeeded' AND old.state <> 'failed'
    AND old.state <> 'dead' AND old.state <> 'cancelled'
    AND (new.state = 'succeeded' OR new.state = 'failed'
        OR new.state = 'dead' OR new.state = 'cancelled')
    AND EXISTS (
        SELECT 1 FROM job_parents WHERE parent_id = new.id
            AND child_id > (SELECT min(child_id) FROM job_parents WHERE parent_id = new.id)
    )
BEGIN
    UPDATE jobs SET
        parents_left = parents_left - 1,
        parents_failed = parents_failed + (new.state <> 'succeeded')
    WHERE id IN (
        SELECT child_id FROM job_parents WHERE parent_id = new.id
            AND child_id > (SELECT min(child_id) FROM job_parents WHERE parent_id = new.id)
    )
        AND state = 'waiting';
END;

-- A parent retried leaves its end: its waiting children wait for it again.
CREATE TRIGGER jobs_parent_reopened AFTER UPDATE OF finished_at ON jobs
WHEN new.has_children = 1
    AND (old.state = 'succeeded' OR old.state = 'failed'
        OR old.state = 'dead' OR old.state = 'cancelled')
    AND new.state <> 'succeeded' AND new.state <> 'failed'
    AND new.state <> 'dead' AND new.state <> 'cancelled'
BEGIN
    UPDATE jobs SET
        parents_left = parents_left + 1,
        parents_failed = parents_failed - (old.state <> 'succeeded')
    WHERE id = (SELECT min(child_id) FROM job_parents WHERE parent_id = new.id)
        AND state = 'waiting';
END;

CREATE TRIGGER jobs_parent_reopened_more AFTER UPDATE OF finished_at ON jobs
WHEN new.has_children = 1
    AND (old.state = 'succeeded' OR old.state = 'failed'
        OR old.state = 'dead' OR old.state = 'cancelled')
    AND new.state <> 'succeeded' AND new.state <> 'failed'
    AND new.state <> 'dead' AND new.state <> 'cancelled'
    AND EXISTS (
        SELECT 1 FROM job_parents WHERE parent_id = new.id
            AND child_id > (SELECT min(child_id) FROM job_parents WHERE parent_id = new.id)
    )
BEGIN
    UPDATE jobs SET
        parents_left = parents_left + 1,
        parents_failed = parents_failed - (old.state <> 'succeeded')
    WHERE id IN (
        SELECT child_id FROM job_parents WHERE parent_id = new.id
            AND child_id > (SELECT min(child_id) FROM job_parents WHERE parent_id = new.id)
    )
        AND state = 'waiting';
END;

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

-- Declared jobs (ops/functions.py): every distinct declaration of a name a
-- worker's --modules declare (declaration: JSON of its parameters, options
-- and docstring; fingerprint: its hash), and which worker serves which
-- version. Whether a server is live is the workers table's to say.
CREATE TABLE function_versions (
    name TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    declaration TEXT NOT NULL,
    first_published_at REAL NOT NULL,
    published_at REAL NOT NULL,
    published_by TEXT NOT NULL,
    PRIMARY KEY (name, fingerprint)
);

CREATE TABLE function_servers (
    worker_id TEXT NOT NULL,
    name TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (worker_id, name)
);

CREATE INDEX function_servers_by_name ON function_servers (name, fingerprint);

-- How long finished jobs are kept (ops/retention.py): succeeded ones, and the
-- failed, dead and cancelled ones. NULL: until pruned by hand.
CREATE TABLE retention (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    succeeded_seconds REAL CHECK (succeeded_seconds > 0),
    failed_seconds REAL CHECK (failed_seconds > 0)
);

INSERT INTO retention (id, succeeded_seconds, failed_seconds) VALUES (1, 604800, 604800);
