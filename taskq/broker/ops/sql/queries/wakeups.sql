-- Where workers on a cluster listen for wake-up hints (taskq/broker/ops/wakeups.py).

-- name: worker_wake_addresses
-- Active workers only: one that stopped or was lost hears nothing.
SELECT wake_address, queues FROM workers
WHERE state = 'active' AND wake_address IS NOT NULL;
