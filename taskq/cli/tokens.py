"""``taskq token new|list|revoke``: the bearer tokens of ``taskq serve``, kept in the config file.

A new token is printed once, alone on stdout (``TOKEN=$(taskq token new ...)``),
and the file keeps only its SHA-256: nothing in it could be presented to the
server. The entry is appended as text, so the rest of the file, its comments
included, stays as the user wrote it; ``revoke`` takes out that entry alone.
A running ``taskq serve`` follows the file: it takes a new token, and
refuses a revoked one, within a second or so; one started with no token
(open to every request) stays open until it is restarted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shlex
import tempfile
from pathlib import Path

from taskq import config, errors
from taskq.cli import command, output

# A token's name is the submitter of the jobs sent with it, and is written into TOML.
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_SCOPES = ("read", "submit", "admin")
# Recognisable in a log or a paste, for people and for secret scanners.
_PREFIX = "tq_"


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq token`` and its actions."""
    actions = command.add_group(
        commands,
        "token",
        help="the HTTP API's bearer tokens: new, list, revoke",
        description="The bearer tokens of taskq serve, kept in the config file's [server].\n"
        "The secret is printed once; the file keeps its SHA-256 only. A running\n"
        "taskq serve follows the file: new and revoked tokens count within a second\n"
        "(one started with no token stays open until restarted).\n\n"
        "  export TOKEN=$(taskq token new scripts --scopes read,submit)\n"
        "  taskq token list\n"
        "  taskq token revoke scripts",
        dest="token_command",
    )
    new = command.add(
        actions,
        "new",
        cmd_new,
        help="make a token, print it once, keep its hash in the config file",
    )
    new.add_argument("name", help="who holds it: the submitter of the jobs sent with it")
    new.add_argument(
        "--scopes",
        default="read,submit",
        help="comma-separated, of read (GET), submit (jobs, cancel, retry) and admin "
        "(everything); default: read,submit",
    )
    command.add(
        actions, "list", cmd_list, help="the config file's tokens: names and scopes", json=True
    )
    revoke = command.add(actions, "revoke", cmd_revoke, help="take a token out of the file")
    revoke.add_argument("name", help="the token's name")
    for parser in (commands.choices["token"], *actions.choices.values()):
        _store_unlisted(parser)


def _store_unlisted(parser: argparse.ArgumentParser) -> None:
    """Leave ``--store`` out of ``parser``'s help: the tokens are kept in the config file,
    not in a store, so it changes nothing here. It is still taken, unused, so that a
    ``taskq --store URL`` kept in an alias or a script works with these commands too."""
    # argparse has no public way to reach an option once added.
    for action in parser._actions:
        if "--store" in action.option_strings:
            action.help = argparse.SUPPRESS


def _config_path(args: argparse.Namespace) -> Path:
    """The file ``taskq serve`` reads: --config, TASKQ_CONFIG, else the user's."""
    explicit = getattr(args, "config", None) or os.environ.get(config.CONFIG_ENV)
    return Path(explicit).expanduser() if explicit else config.default_config_path()


def _scopes(text: str) -> list[str]:
    scopes = [scope.strip() for scope in text.split(",") if scope.strip()]
    unknown = [scope for scope in scopes if scope not in _SCOPES]
    if unknown or not scopes:
        raise errors.ConfigError(f"--scopes {text!r}: each scope is one of {', '.join(_SCOPES)}")
    return sorted(set(scopes), key=_SCOPES.index)


def _entry(name: str, scopes: list[str], digest: str) -> str:
    # JSON strings are TOML basic strings for these characters (names are checked).
    return (
        "\n[[server.tokens]]\n"
        f"name = {json.dumps(name)}\n"
        f"scopes = {json.dumps(scopes)}\n"
        f'sha256 = "{digest}"\n'
    )


def _write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` whole, so a crash leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(scratch, mode)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def cmd_new(args: argparse.Namespace) -> int:
    """Append a token's entry to the config file and print the token, once."""
    if not _NAME.fullmatch(args.name):
        raise errors.ConfigError(
            f"token name {args.name!r}: 1 to 64 letters, digits and the characters _ . @ -"
        )
    scopes = _scopes(args.scopes)
    path = _config_path(args)
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    known = config.load_config(path) if path.exists() else config.Config()
    if any(token.name == args.name for token in known.server.tokens):
        # Not a usage error: the name is taken in this file, as a schedule's can be in a store.
        raise errors.TaskqError(
            f"{path}: a token named {args.name!r} exists already; revoke it first "
            f"({_revoke_command(args)}) or choose another name"
        )
    token = _PREFIX + secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    after = before + ("" if before.endswith("\n") or not before else "\n")
    after += (
        _entry(args.name, scopes, digest) if before else _entry(args.name, scopes, digest).lstrip()
    )
    _write_atomically(path, after)
    try:
        config.load_config(path)
    except errors.ConfigError:
        # The file held its tokens some other way (an inline array, say):
        # put it back as it was rather than leave it unreadable.
        _write_atomically(path, before)
        raise errors.ConfigError(
            f"{path}: cannot add a [[server.tokens]] entry to this file; add it by hand "
            f"(name = {args.name!r}, scopes, sha256)"
        ) from None
    print(token)
    output.warn(
        f"taskq: token {args.name!r} ({', '.join(scopes)}) added to {path}; the file keeps "
        "only its SHA-256, so save it now: it is not shown again. A running taskq serve "
        "started with tokens accepts it within a second or so; one started with none is "
        "open to every request until it is restarted."
    )
    return command.EXIT_OK


def _revoke_command(args: argparse.Namespace) -> str:
    """The ``taskq token revoke`` of the token ``args`` name, in the same config file."""
    explicit = getattr(args, "config", None)
    given = f" --config {shlex.quote(explicit)}" if explicit else ""
    return f"taskq token revoke {shlex.quote(args.name)}{given}"


# A table header: where a [[server.tokens]] entry ends.
_HEADER = re.compile(r"\s*\[")


def _without_entry(text: str, name: str) -> str | None:
    """``text`` without the ``[[server.tokens]]`` entry named ``name``; None if it has none."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == "[[server.tokens]]"]
    for start in starts:
        end = next((i for i in range(start + 1, len(lines)) if _HEADER.match(lines[i])), len(lines))
        entry = "".join(lines[start:end])
        if config.tokens_named(entry, name):
            while start > 0 and not lines[start - 1].strip():
                start -= 1  # the blank line that set it apart goes with it
            return "".join(lines[:start] + lines[end:])
    return None


def cmd_revoke(args: argparse.Namespace) -> int:
    """Take the token's entry out of the config file, the rest kept as written."""
    path = _config_path(args)
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    after = _without_entry(before, args.name)
    if after is None:
        # Not a usage error: no such token, as there can be no such job or schedule.
        raise errors.TaskqError(f"{path}: no [[server.tokens]] entry named {args.name!r}")
    _write_atomically(path, after)
    try:
        left = config.load_config(path).server.tokens
    except errors.ConfigError:
        _write_atomically(path, before)
        raise
    if any(token.name == args.name for token in left):
        _write_atomically(path, before)
        raise errors.ConfigError(f"{path}: cannot take {args.name!r} out; remove it by hand")
    output.warn(
        f"taskq: token {args.name!r} revoked in {path}; a running taskq serve refuses it "
        "within a second or so"
    )
    return command.EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    """The tokens ``taskq serve`` would accept: names and scopes, never secrets."""
    path = _config_path(args)
    tokens = config.load_config(path).server.tokens if path.exists() else []
    rows = [
        {"name": token.name, "scopes": list(token.scopes), "kept_as": _kept_as(token)}
        for token in tokens
    ]
    if args.json:
        output.print_json(rows)
    elif not rows:
        print(f"no tokens in {path}: taskq serve is open, on a loopback address only")
    else:
        output.print_table(
            ["NAME", "SCOPES", "KEPT AS"],
            [[row["name"], ",".join(row["scopes"]), row["kept_as"]] for row in rows],
        )
    return command.EXIT_OK


def _kept_as(token: config.TokenSection) -> str:
    return "sha256" if token.sha256 is not None else "plain token (for tests only)"
