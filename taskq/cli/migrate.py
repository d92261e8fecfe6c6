"""``taskq migrate``: bring a store's schema up to this taskq's on purpose, or check it.

Workers and writing commands migrate a store that is behind as they open it
(docs/upgrades.md). This command is the step an operator takes on purpose,
as ``manage.py migrate`` or ``alembic upgrade head`` is: after a backup,
before the new release's workers start. ``--check`` writes nothing and exits
1 while migrations are pending, for a script or a deployment to ask first.
"""

from __future__ import annotations

import argparse

from taskq import errors
from taskq.broker.stores.store_url import mask_password
from taskq.cli import command, connection, output


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq migrate``."""
    migrate = command.add(
        commands,
        "migrate",
        cmd_migrate,
        help="bring the store's schema up to this taskq's (or, with --check, only say "
        "whether migrations are pending)",
        description="Bring the store's schema up to this taskq's, and say from which "
        "version to which.\n\n"
        "  taskq backup /backups/before-upgrade.db   # first: a migrated store cannot go back\n"
        "  taskq migrate --check                     # exit 1 while migrations are pending\n"
        "  taskq migrate                             # apply them\n\n"
        "Workers and writing commands of this taskq would apply them too, as they open the\n"
        "store: see docs/upgrades.md.",
        json=True,
    )
    migrate.add_argument(
        "--check",
        action="store_true",
        help="write nothing: exit 0 when the store's schema is this taskq's, 1 when "
        "migrations are pending or the store is newer",
    )


def cmd_migrate(args: argparse.Namespace) -> int:
    # The store itself: a taskq serve's URL is refused before anything is done.
    url = connection.store_url(args)
    shown = mask_password(url)
    before = _version(url)
    if args.check:
        # Raises SchemaBehind (pending) or SchemaNewer, each one line naming both versions.
        with connection.opened_url(url, read_only=True):
            pass
        _report(args, shown, before, before, checked=True)
        return command.EXIT_OK
    with connection.client_at(url, config=args.config) as client:
        after = client.schema_version()
    _report(args, shown, before, after, checked=False)
    return command.EXIT_OK


def _version(url: str) -> int:
    """The store's schema version before this command, read without writing (0: none yet)."""
    try:
        with connection.client_at(url, migrate=False, read_only=True) as client:
            return client.schema_version()
    except errors.SchemaBehind:
        return 0  # a SQLite file not there yet: nothing was ever written to it
    except errors.StatementError as exc:
        if "no such table" not in str(exc):
            raise
        return 0  # a store that exists but holds no taskq schema yet


def _report(
    args: argparse.Namespace, store: str, before: int, after: int, *, checked: bool
) -> None:
    if args.json:
        output.print_json(
            {"store": store, "from_version": before, "schema_version": after, "check": checked}
        )
    elif checked:
        print(f"{store} has schema version {after}, this taskq's: no migration pending")
    elif before == after:
        print(f"{store} has schema version {after}, this taskq's: nothing to migrate")
    elif before == 0:
        print(f"{store} set up at schema version {after}")
    else:
        print(f"{store} migrated from schema version {before} to {after}")
