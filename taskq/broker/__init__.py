"""The broker: job stores, their schema and SQL, and the operations on jobs."""
