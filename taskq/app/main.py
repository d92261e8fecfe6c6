"""``taskq-tui``: open the store and run the console until the user quits."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from taskq import __version__, errors
from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Store
from taskq.one_line_parser import OneLineParser

EXIT_ERROR = 1
# As ``taskq`` and ``taskq-worker`` do: a script can tell a setup to fix from a store to wait for.
EXIT_CONFIG = 2


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from exc
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``taskq-tui``."""
    parser = OneLineParser(
        prog="taskq-tui",
        description="The live console of a taskq store: nodes, queues, workers, jobs.",
    )
    parser.add_argument("--version", action="version", version=f"taskq-tui {__version__}")
    parser.add_argument(
        "--store",
        help="store URL (sqlite:///file.db or rqlite://host:port,...); "
        "default: TASKQ_STORE, the config file, then a file in your data directory",
    )
    parser.add_argument("--config", help="config file (default: TASKQ_CONFIG or the user one)")
    parser.add_argument(
        "--refresh",
        type=_seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds between polls (default 1)",
    )
    return parser


def open_console_store(url: str | None, config_path: str | None) -> Store:
    """Open the store, bringing its schema up to date when it answers.

    An unreachable cluster is not an error here: the console starts anyway,
    shows the banner, and recovers by itself when the cluster comes back.
    A SQLite file that is not there is refused, as commands that only read
    refuse it: a console on it would make an empty store, of a misspelt
    path most often, and show it as if it were the one meant.
    """
    open_store(url, config_path=config_path, read_only=True, migrate=False).close()
    try:
        return open_store(url, config_path=config_path)
    except errors.StoreUnavailable:
        return open_store(url, config_path=config_path, migrate=False)


async def _run(store: Store, refresh_seconds: float) -> None:
    # Imported here so `taskq-tui --help` answers without loading Textual.
    from taskq.app.app import ConsoleApp
    from taskq.app.source import ConsoleSource

    try:
        await ConsoleApp(ConsoleSource(store), refresh_seconds=refresh_seconds).run_async()
    finally:
        await store.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console; one line on stderr when the store cannot be opened.

    The exit status is then 2 for a bad config file or store URL, 1 otherwise.
    """
    args = build_parser().parse_args(argv)
    try:
        store = open_console_store(args.store, args.config)
    except errors.ConfigError as exc:
        print(f"taskq-tui: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except errors.TaskqError as exc:
        print(f"taskq-tui: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    asyncio.run(_run(store, args.refresh))
    return 0


if __name__ == "__main__":
    sys.exit(main())
