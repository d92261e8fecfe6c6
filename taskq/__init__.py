"""taskq: a job queue that never loses a job, on embedded SQLite or a replicated rqlite."""

__version__ = "0.1.0"
