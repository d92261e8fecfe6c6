"""The broker's public API: ``Client`` and ``AsyncClient`` over the operations.

``client_base.py`` builds each request's plan once and ``client.py`` runs it,
blocking or awaited; ``declared.py`` is ``@taskq.job``; ``seed_jobs.py``
reads seed-format JSON jobs; ``group_commit.py`` lets concurrent submits of
one client share a write; ``wake_sender.py`` tells idle workers of a submit;
``connect.py`` opens a store by URL with its schema brought up to date.
"""
