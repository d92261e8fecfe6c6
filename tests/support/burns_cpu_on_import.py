"""A module whose import takes more CPU time than a small job may use (a heavy library's).

A worker imports its modules in each pool child before the child's first
job: that CPU time is the child's, and must not count towards the job's.
"""

import time

IMPORT_CPU_SECONDS = 2.5
"""More than a 1 s job's limit and the keeper's grace together."""

while time.process_time() < IMPORT_CPU_SECONDS:
    pass
