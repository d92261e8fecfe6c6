"""Running one job in a contained child process: the sandbox the worker's slots use.

Nothing here talks to the store or knows the worker's loops: a claimed job
is prepared once into a ``JobRequest`` (see ``preparation``), run in a child
and judged into an ``Outcome``. The modules a child imports (``child``,
``keeper``, ``job_process``, ``rlimits``, ``protocol``) must stay cheap to
import, so this package's ``__init__`` imports nothing; those it imports
before it splits into keeper and job process (``child``, ``keeper``,
``cgroups``, ``linux``, ``lease_deadline``) import no msgspec either, as the
job process imports the rest while its keeper moves it into its groups.
"""
