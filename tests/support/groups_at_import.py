"""A module that notes, as it is imported, the control groups of the process importing it.

A worker imports its modules in its pool children before their first job;
the note goes to the file named by ``GROUPS_NOTE_ENV``, one line a process.
"""

import os

GROUPS_NOTE_ENV = "TASKQ_TEST_GROUPS_NOTE"


def own_groups() -> str:
    with open("/proc/self/cgroup") as groups:
        return groups.read()


_note = os.environ.get(GROUPS_NOTE_ENV)
if _note:
    with open(_note, "a") as file:
        file.write(own_groups().replace("\n", " ") + "\n")
