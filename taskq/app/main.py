"""``taskq-tui``: the console, on a store or over a taskq serve, until the user quits."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from taskq import __version__, errors
from taskq.broker.client.client import AsyncClient
from taskq.broker.client.connect import client_url, open_store
from taskq.broker.stores.store import Store
from taskq.broker.stores.store_url import is_http_url
from taskq.one_line_parser import OneLineParser

EXIT_ERROR = 1
# As ``taskq`` and ``taskq-worker`` do: a script can tell a setup to fix from a store to wait for.
EXIT_CONFIG = 2
# A request of the console over a taskq serve gives up after this many seconds (a
# script's client waits 30): a server gone shows in the banner soon, and each poll is
# a few small reads.
HTTP_TIMEOUT_SECONDS = 5.0


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
        help="store URL (sqlite:///file.db or rqlite://host:port,...), or a taskq serve's "
        "(http(s)://host:port, its token in TASKQ_TOKEN); "
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


def open_console_client(url: str | None, config_path: str | None) -> AsyncClient:
    """The console's client: on the store (see :func:`open_console_store`), or over the
    taskq serve a URL names, bearing ``TASKQ_TOKEN``. A server that does not answer, or
    refuses the token, is not an error here: the console shows it in its banner."""
    resolved = client_url(url, config_path)
    if is_http_url(resolved):
        return AsyncClient(
            resolved, config_path=config_path, import_names=False, timeout=HTTP_TIMEOUT_SECONDS
        )
    return AsyncClient(store=open_console_store(resolved, config_path), import_names=False)


async def _run(client: AsyncClient, refresh_seconds: float) -> None:
    # Imported here so `taskq-tui --help` answers without loading Textual.
    from taskq.app.app import ConsoleApp
    from taskq.app.source import ConsoleSource

    async with client:
        await ConsoleApp(ConsoleSource(client), refresh_seconds=refresh_seconds).run_async()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console; one line on stderr when the store cannot be opened.

    The exit status is then 2 for a bad config file or store URL, 1 otherwise.
    """
    args = build_parser().parse_args(argv)
    try:
        client = open_console_client(args.store, args.config)
    except errors.ConfigError as exc:
        print(f"taskq-tui: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except errors.TaskqError as exc:
        print(f"taskq-tui: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    asyncio.run(_run(client, args.refresh))
    return 0


if __name__ == "__main__":
    sys.exit(main())
