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

-- name: clock_tick
UPDATE taskq_clock SET now = COALESCE(:now, (julianday('now') - 2440587.5) * 86400.0) WHERE id = 1

-- name: clock_read
SELECT (julianday('now') - 2440587.5) * 86400.0 AS now
