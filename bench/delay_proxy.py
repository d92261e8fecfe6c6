"""A TCP forwarder that holds every chunk for a set delay: a LAN's latency without netem.

Run inside a store node's network namespace (``python bench/delay_proxy.py
--forward LISTEN=TARGET ...``), it listens on the node's address on the
bridge and forwards to the ``rqlited`` listening on the namespace's loopback,
so that every connection to the node, from a worker, a client or another
node, crosses it. Each chunk read in either direction is sent on half the
round-trip time later, so one request and its answer take one round trip
more; chunks keep their order, and later chunks are read while earlier ones
wait, so a long transfer is delayed, not slowed.

Threads, not asyncio: an event loop's timers wake on whole milliseconds
(epoll's timeout), too coarse for a 0.5 ms round trip; ``time.sleep`` wakes
within tens of microseconds. It prints ``ready`` once listening, takes a new
round trip from a line ``rtt <ms>`` on stdin (answering ``ok``), and exits
when its stdin closes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Sequence

_CHUNK = 65536


class Delay:
    """The one-way delay, in seconds, that every direction of every connection reads."""

    def __init__(self, rtt_ms: float) -> None:
        self.one_way = rtt_ms / 2000


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _pipe(source: socket.socket, target: socket.socket, delay: Delay) -> None:
    """Copy ``source`` to ``target``, each chunk held until its due time; then half-close."""
    held: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

    def send() -> None:
        try:
            while True:
                due, data = held.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        while data := source.recv(_CHUNK):
            held.put((time.monotonic() + delay.one_way, data))
    except OSError:
        pass
    held.put((time.monotonic() + delay.one_way, b""))
    sender.join()


def _connection(client: socket.socket, target: tuple[str, int], delay: Delay) -> None:
    try:
        upstream = socket.create_connection(target, timeout=5)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    for sock in (client, upstream):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pipe, args=(upstream, client, delay), daemon=True)
    back.start()
    _pipe(client, upstream, delay)
    back.join()
    client.close()
    upstream.close()


def _listen(listen: tuple[str, int], target: tuple[str, int], delay: Delay) -> socket.socket:
    server = socket.create_server(listen, backlog=128)

    def accept() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            args = (client, target, delay)
            threading.Thread(target=_connection, args=args, daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--forward", action="append", required=True, help="LISTEN_HOST:PORT=TARGET_HOST:PORT"
    )
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="the round trip to add")
    args = parser.parse_args(argv)
    delay = Delay(args.rtt_ms)
    for pair in args.forward:
        listen, _, target = pair.partition("=")
        _listen(_address(listen), _address(target), delay)
    print("ready", flush=True)
    for line in sys.stdin:
        word, _, value = line.partition(" ")
        if word == "rtt":
            delay.one_way = float(value) / 2000
            print("ok", flush=True)
    os._exit(0)  # connection threads may still be blocked in recv


if __name__ == "__main__":
    main()
