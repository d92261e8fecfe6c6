"""Hosts on one machine, each in a network namespace of its own, joined by a bridge.

A :class:`Lan` makes a namespace for its switch, which holds the bridge, and
one for each host, which holds one end of a veth pair (``eth0``, with the
host's address on ``10.45.0.0/24``) whose other end is a port of the bridge.
Nothing is added to the namespace the caller runs in: the links live and die
with the namespaces, which :meth:`Lan.close` deletes, also after a failure.
The namespaces' names carry this process's pid and a random tag, so runs in
parallel do not meet.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

SUBNET = "10.45.0"
_TIMEOUT = 15.0


class NamespacesUnavailable(RuntimeError):
    """Network namespaces, a bridge or veth pairs cannot be made here."""


def _ip() -> str:
    return shutil.which("ip") or "/usr/sbin/ip"


def _run(argv: Sequence[str]) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=_TIMEOUT)
    if done.returncode != 0:
        raise NamespacesUnavailable(
            f"`{' '.join(argv)}` said: {done.stderr.strip() or done.returncode}"
            " (network namespaces need root, CAP_NET_ADMIN and CAP_SYS_ADMIN, and iproute2)"
        )


@dataclass(frozen=True)
class Host:
    """One host of the LAN: its namespace and its address on the bridge."""

    namespace: str
    address: str

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the host (``ip netns exec`` execs: the pid is the command's)."""
        return [_ip(), "netns", "exec", self.namespace, *argv]


class Lan:
    """A bridge and hosts on it, made on :meth:`add`, all deleted on :meth:`close`."""

    def __init__(self) -> None:
        self.prefix = f"tq{os.getpid()}{secrets.token_hex(2)}"
        self.hosts: dict[str, Host] = {}
        self._made: list[str] = []
        self._switch = f"{self.prefix}-sw"
        self._add_namespace(self._switch)
        ip = _ip()
        try:
            _run([ip, "-n", self._switch, "link", "add", "br0", "type", "bridge"])
            _run([ip, "-n", self._switch, "link", "set", "br0", "up"])
        except BaseException:
            self.close()
            raise

    def _add_namespace(self, name: str) -> None:
        _run([_ip(), "netns", "add", name])
        self._made.append(name)
        _run([_ip(), "-n", name, "link", "set", "lo", "up"])

    def add(self, name: str) -> Host:
        """A new host ``name`` (a few letters) on the bridge, with the next free address."""
        ip = _ip()
        number = len(self.hosts) + 2
        namespace = f"{self.prefix}-{name}"
        self._add_namespace(namespace)
        port = f"p{number}"
        _run(
            [
                ip,
                "-n",
                self._switch,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                namespace,
            ]
        )
        _run([ip, "-n", self._switch, "link", "set", port, "master", "br0", "up"])
        address = f"{SUBNET}.{number}"
        _run([ip, "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0"])
        _run([ip, "-n", namespace, "link", "set", "eth0", "up"])
        host = Host(namespace, address)
        self.hosts[name] = host
        return host

    def close(self) -> None:
        """Delete every namespace made, and with them their links and the bridge."""
        while self._made:
            subprocess.run(
                [_ip(), "netns", "delete", self._made.pop()],
                capture_output=True,
                check=False,
                timeout=_TIMEOUT,
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def leftover_namespaces(prefix: str) -> list[str]:
    """The namespaces whose names start with ``prefix`` (to check a teardown)."""
    listed = subprocess.run([_ip(), "netns", "list"], capture_output=True, text=True, check=False)
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    return [name for name in names if name.startswith(prefix)]
