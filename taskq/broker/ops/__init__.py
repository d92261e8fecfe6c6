"""The broker's operations, one module per entity; each owns its SQL statements.

Each operation is a plan (see :mod:`taskq.broker.ops.plan`): it yields one atomic
batch or read at a time, and the sync or async runner carries it out. Names
put the entity first (``job_claim``, ``worker_register``). Every operation
that depends on time takes ``now`` (unix seconds) for tests; left ``None``,
the store's clock decides.

The SQL of ``ops/x.py`` is in ``sql/queries/x.sql``, with no exception: the
leader lease (``leader.py``), the maintenance services (``maintenance.py``),
the schedules (``schedules.py``) and the migrations (``migrations.py``) too.
``plan.py`` says what an operation yields and runs it on a store;
``queries.py`` loads the named SQL blocks.
"""
