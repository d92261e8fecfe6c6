-- When a job was claimed, kept apart from when its code started: a job claimed
-- ahead of a free slot may wait for one first. Rows from before have one time
-- for both, their claim.

ALTER TABLE jobs ADD COLUMN claimed_at REAL;
ALTER TABLE executions ADD COLUMN claimed_at REAL;
UPDATE jobs SET claimed_at = started_at WHERE started_at IS NOT NULL;
UPDATE executions SET claimed_at = started_at;
