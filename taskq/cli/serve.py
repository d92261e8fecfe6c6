"""``taskq serve``: the HTTP API and Prometheus metrics (taskq.server), with the [server] config."""

from __future__ import annotations

import argparse

import msgspec

from taskq import errors
from taskq.cli import command, connection
from taskq.config import config_file_read, load_config

INSTALL_HINT = (
    "taskq serve needs the server extra: pip install '.[server]' in taskq's checkout "
    "(scripts/taskq installs it)"
)
# What the extra installs: one of them missing is the hint above, not a traceback.
SERVER_PACKAGES = frozenset({"starlette", "uvicorn", "prometheus_client"})


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq serve``."""
    parser = command.add(
        commands,
        "serve",
        cmd_serve,
        help="serve the HTTP API and Prometheus metrics over the store",
        description="Serve the HTTP API (/jobs, /workflows, /queues, /workers, /schedules;\n"
        "OpenAPI at /openapi.json), /healthz, /readyz and /metrics over the store.\n"
        "Stateless: several servers may run against one rqlite cluster. Tokens, TLS files\n"
        "and the default address come from the config file's [server] section.\n\n"
        "  taskq serve --store rqlite://10.0.0.1:4001 --listen 0.0.0.0:8080",
    )
    parser.add_argument("--listen", help="HOST:PORT to listen on (default: [server] listen)")
    parser.add_argument("--tls-cert", help="certificate file (PEM): serve HTTPS")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")


def cmd_serve(args: argparse.Namespace) -> int:
    settings = load_config(args.config).server
    overrides = {
        key: value
        for key, value in (
            ("listen", args.listen),
            ("tls_cert", args.tls_cert),
            ("tls_key", args.tls_key),
        )
        if value is not None
    }
    try:
        from taskq.server import run
    except ModuleNotFoundError as exc:
        if exc.name not in SERVER_PACKAGES:
            raise
        raise errors.ConfigError(INSTALL_HINT) from exc
    run.serve(
        connection.store_url(args),
        msgspec.structs.replace(settings, **overrides),
        tokens_file=config_file_read(args.config),
    )
    return command.EXIT_OK
