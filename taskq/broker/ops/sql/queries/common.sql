-- The store's clock, which every batch that needs the time starts with; and
-- what holds for the statements of every file in this folder.
--
-- Each file holds the named blocks of one module (enqueue.sql those of
-- taskq/broker/ops/enqueue.py, ...). A block is headed `-- name: <name>` and
-- is looked up by that name, unique across the folder.
--
-- Time. Every time is unix seconds (REAL) on the store's clock. A batch that
-- needs the time starts with `clock_tick`, which writes the clock's reading
-- (or an injected :now) into the single row of taskq_clock; its other
-- statements read `(SELECT now FROM taskq_clock)` and never mention 'now'.
-- rqlite rewrites julianday('now') into a literal on the node that receives
-- the write, so every replica stores the same value, but in rqlite 10.2 it
-- does not rewrite 'now' inside a subquery, and an UPDATE or DELETE whose
-- time is rewritten loses its RETURNING rows. Reading the clock row avoids
-- both. Resolution on rqlite is 1e-6 day (86 ms).
--
-- RETURNING stays on the same line as its first column: rqlite recognises it
-- by the text "returning " followed by a space.
--
-- Every LIMIT in a write follows an ORDER BY that ends in a unique column, so
-- every replica picks the same rows.

-- The clock does not go back in commit order. rqlite fixes a write's reading
-- when its node receives it, so a write received earlier may commit later
-- with an earlier reading: a claim that saw a report's freed place would then
-- start before that report ended. Such a reading leaves the clock where it
-- was. A reading more than a second back is a clock set back, or a test's
-- injected time that ran ahead, and is taken as it is, as is an injected :now.
-- name: clock_tick
UPDATE taskq_clock SET now = COALESCE(
    :now,
    CASE
        WHEN (julianday('now') - 2440587.5) * 86400.0 < now - 1.0
        THEN (julianday('now') - 2440587.5) * 86400.0
        ELSE MAX(now, (julianday('now') - 2440587.5) * 86400.0)
    END
)
WHERE id = 1

-- name: clock_read
SELECT (julianday('now') - 2440587.5) * 86400.0 AS now
