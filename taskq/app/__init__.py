"""The console: a Textual view of the cluster, queues, workers and jobs."""
