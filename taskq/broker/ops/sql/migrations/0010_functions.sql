-- Declared jobs (issue 42): what each worker's --modules declare, so that a
-- submit by name gets the declared options and an unknown name is refused.
--
-- function_versions keeps every distinct declaration of a name (its
-- fingerprint is a hash of the declaration), with when it first and last
-- appeared and who published it last. function_servers says which worker
-- serves which version; whether that worker is live is the workers table's.

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
