-- An attempt's whole output, when it was small and came all with its report
-- (taskq/broker/ops/output.py, inline_text): stored in its row, in place of a
-- chunk in job_output, so a short job that prints costs its report no row
-- more. NULL: the output, if any, is in job_output's chunks.

ALTER TABLE executions ADD COLUMN output_inline TEXT;
