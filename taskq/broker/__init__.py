"""The broker, in three layers: ``client/`` over ``ops/`` over ``stores/``.

``stores/`` holds the stores and their transport, ``ops/`` every operation
on jobs with its SQL (``ops/sql/``), ``client/`` the public API. Each layer
imports only those below it. Beside them, ``records.py``, ``limits.py``,
``worker_policy.py`` and ``job_validation.py`` are the records and checks
that the layers share.
"""
