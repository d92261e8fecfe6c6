-- How long finished jobs are kept before maintenance prunes them, one row for
-- the whole store (ops/retention.py): every worker that takes the leader
-- lease prunes by the same figures, and `taskq retention` shows and sets
-- them. Succeeded jobs apart from the rest, so that the failures a lab looks
-- back on can outlive the routine successes. NULL: kept until pruned by hand.
-- Seconds; the default, 7 days, is what maintenance pruned by before.

CREATE TABLE retention (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    succeeded_seconds REAL CHECK (succeeded_seconds > 0),
    failed_seconds REAL CHECK (failed_seconds > 0)
);

INSERT INTO retention (id, succeeded_seconds, failed_seconds) VALUES (1, 604800, 604800);
