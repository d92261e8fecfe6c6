"""The floor under any request on loopback: a round trip to a process that only echoes.

``GET /healthz`` is the floor of taskq's server (uvicorn, Starlette, the token
check); beneath any server is the kernel's trip from one process to another
and back, which none can cut. This times that trip with the least work on
either side: a blocking socket in a child process that sends back whatever
it reads, over one connection with Nagle's algorithm off, back to back, as a
keep-alive client sends its requests.

From it comes the most ``POST /jobs`` on one connection could reach against
``Client.submit`` (issue 44 asks for 0.8x): a server that cost nothing would
still add one round trip to each submit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from bench.common import percentile

HOST = "127.0.0.1"
MESSAGE_BYTES = 256  # about a one-job POST /jobs with its headers

_ECHO = f"""
import socket
listener = socket.create_server(({HOST!r}, 0))
print(listener.getsockname()[1], flush=True)
connection, _ = listener.accept()
connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while data := connection.recv(65536):
    connection.sendall(data)
"""


def round_trip_ms(count: int) -> float:
    """p50 ms of ``count`` round trips of :data:`MESSAGE_BYTES` to an echoing process."""
    echo = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout is not None
        port = int(echo.stdout.readline())
        with socket.create_connection((HOST, port)) as connection:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return percentile(_round_trips(connection, count), 0.5)
    finally:
        echo.kill()
        echo.wait()


def _round_trips(connection: socket.socket, count: int) -> list[float]:
    message = b"x" * MESSAGE_BYTES
    times = []
    for _ in range(count):
        started = time.perf_counter()
        connection.sendall(message)
        received = 0
        while received < MESSAGE_BYTES:
            chunk = connection.recv(65536)
            if not chunk:
                raise RuntimeError("the echoing process closed the connection")
            received += len(chunk)
        times.append((time.perf_counter() - started) * 1000)
    return times


def reachable_ratio(client_jobs_per_second: float, round_trip_ms_p50: float) -> float:
    """POST /jobs / Client.submit for a server that cost nothing: one round trip more a job."""
    submit_ms = 1000 / client_jobs_per_second
    return submit_ms / (submit_ms + round_trip_ms_p50)
