"""The worker: runs jobs in resource-limited child processes (built on the broker's API)."""
