"""The broker's public API: ``Client`` and ``AsyncClient`` over the operations.

``operations.py`` declares each request once with its plan (by group:
``job_operations.py``, ``fleet_operations.py``, ``schedule_operations.py``),
``client_base.py`` builds the submits, and the two clients run them, blocking
(``blocking_client.py``) or awaited (``async_client.py``), each with the
handles its submits return (``handle_base.py``: what they share); ``client.py``
names them all. ``declared.py`` is ``@taskq.job``; ``seed_jobs.py`` reads
seed-format JSON jobs; ``group_commit.py`` lets concurrent submits of
one client share a write; ``wake_sender.py`` tells idle workers of a submit;
``connect.py`` opens a store by URL with its schema brought up to date.
"""
