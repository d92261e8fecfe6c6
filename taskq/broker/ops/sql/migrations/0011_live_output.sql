-- Live output: what each attempt writes to stdout and stderr (its logging
-- records included), in the chunks its worker sent while it ran. at_byte is
-- where a chunk starts among all the bytes the attempt wrote, size how many
-- of them it holds, data their text (bytes that are not UTF-8 replaced). A
-- gap before or between chunks is output dropped: the oldest past the
-- attempt's cap, or more than its worker would send in one write.
-- executions.output_bytes is where the attempt's output ends so far, dropped
-- bytes included. The end-of-attempt tail is read from these rows: attempts
-- from before keep the log_tail they were reported with.

CREATE TABLE job_output (
    execution_id INTEGER NOT NULL,
    at_byte INTEGER NOT NULL CHECK (at_byte >= 0),
    size INTEGER NOT NULL CHECK (size > 0),
    data TEXT NOT NULL,
    UNIQUE (execution_id, at_byte)
);

ALTER TABLE executions ADD COLUMN output_bytes INTEGER NOT NULL DEFAULT 0;
