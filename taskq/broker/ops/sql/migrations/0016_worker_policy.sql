-- What a worker may run (taskq/broker/worker_policy.py: its modules, and
-- whether it runs python_exec and shell jobs), as JSON, recorded when it
-- registers: a job one worker's policy refuses goes back for another live
-- worker of its queue whose policy allows it. NULL: a worker of a taskq
-- that records none; it counts for the jobs it declares (function_servers).

ALTER TABLE workers ADD COLUMN policy TEXT;
