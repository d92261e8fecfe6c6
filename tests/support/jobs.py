"""Job functions for the sandbox tests, run as ``call`` targets inside sandbox children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from taskq.worker import progress


class JobFailed(Exception):
    """The error a test job raises on purpose."""


def add(a: int, b: int) -> int:
    return a + b


def getpid() -> int:
    return os.getpid()


def fail(message: str) -> None:
    raise JobFailed(message)


def say_and_return(text: str) -> str:
    print(text)
    return text


def hog_memory() -> None:
    """Touch memory 8 MiB at a time until the address-space limit stops it."""
    chunks = []
    while True:
        chunks.append(b"\x01" * (8 << 20))


def spin() -> None:
    while True:
        pass


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def report_and_sleep(seconds: float) -> None:
    """Tell the worker this job's process group, then wait to be killed."""
    progress.report(0.1, f"pgid={os.getpgid(0)}")
    time.sleep(seconds)


def spawn_grandchild_and_sleep(seconds: float) -> None:
    grandchild = subprocess.Popen(["sleep", "1000"])
    print(f"grandchild={grandchild.pid}")
    time.sleep(seconds)


def flood_output() -> None:
    line = 0
    while True:
        line += 1
        # One write per line, so every line reaches the pipe whole.
        sys.stdout.write(f"line {line:07d}\n")


def report_progress() -> str:
    progress.report(0.5, "halfway")
    return "done"


def return_set() -> set[int]:
    return {1, 2}


def return_text(size: int) -> str:
    return "x" * size


def exit_hard(code: int) -> None:
    os._exit(code)


def segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)
