"""Reading taskq's TOML configuration, with clear errors for typos.

The file is optional. It is found at an explicit path, else at
``TASKQ_CONFIG``, else at ``config.toml`` in the user's config directory.
Unknown sections and keys are errors, not silently ignored: a misspelt
``[stroe]`` would otherwise send jobs to the default store.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from taskq import errors

CONFIG_ENV = "TASKQ_CONFIG"

# The keys each section may hold; each component checks the values' types.
_KNOWN_KEYS: dict[str, set[str]] = {
    "store": {"url"},
    "worker": {
        "queues",
        "modules",
        "concurrency",
        "labels",
        "name",
        "isolation",
        "lease_seconds",
        "heartbeat_seconds",
        "lease_margin_seconds",
        "grace_seconds",
        "idle_poll_seconds",
        "allow_python_exec",
        "allow_shell",
        "env_passthrough",
        "maintenance",
        "pool_recycle_after",
        "max_limits",
        "cpus",
        "prefetch",
        "child_queue",
    },
}


@dataclass(frozen=True, slots=True)
class Config:
    """Settings read from a config file; every field has a usable default."""

    store_url: str | None = None
    worker: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("taskq")) / "config.toml"


def load_config(path: str | Path | None = None) -> Config:
    """Load the configuration; an explicitly named file must exist and parse."""
    explicit = path or os.environ.get(CONFIG_ENV)
    if explicit:
        config_path = Path(explicit).expanduser()
        if not config_path.is_file():
            raise errors.ConfigError(f"config file {config_path} does not exist")
    else:
        config_path = default_config_path()
        if not config_path.is_file():
            return Config()
    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise errors.ConfigError(f"config file {config_path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise errors.ConfigError(f"config file {config_path} cannot be read: {exc}") from exc
    return _parse(data, config_path)


def _parse(data: dict[str, Any], source: Path) -> Config:
    for section, body in data.items():
        if section not in _KNOWN_KEYS:
            raise errors.ConfigError(
                f"{source}: unknown section [{section}]; known: {', '.join(sorted(_KNOWN_KEYS))}"
            )
        if not isinstance(body, dict):
            raise errors.ConfigError(f"{source}: [{section}] must be a table")
        unknown = sorted(set(body) - _KNOWN_KEYS[section])
        if unknown:
            raise errors.ConfigError(
                f"{source}: unknown key(s) {', '.join(unknown)} in [{section}]; "
                f"known: {', '.join(sorted(_KNOWN_KEYS[section]))}"
            )
    store_url = data.get("store", {}).get("url")
    if store_url is not None and not isinstance(store_url, str):
        raise errors.ConfigError(f"{source}: [store] url must be a string")
    return Config(store_url=store_url, worker=dict(data.get("worker", {})), source=source)
