"""Job functions for the sandbox tests, run as ``call`` targets inside sandbox children."""

from __future__ import annotations

import logging
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


def is_imported(module: str) -> bool:
    """Whether ``module`` is imported in this process already (as a pool child's modules are)."""
    return module in sys.modules


def echo(value: object) -> object:
    return value


def getpid() -> int:
    return os.getpid()


def fail(message: str) -> None:
    raise JobFailed(message)


def say_and_return(text: str) -> str:
    print(text)
    return text


def log_info(message: str) -> int:
    """Log ``message`` at INFO (its child's setup shows it); return the child's pid."""
    logging.getLogger("lab.job").info(message)
    return os.getpid()


def log_in_own_format(message: str) -> None:
    """Configure logging as a job that wants its own format does, then log ``message``."""
    logging.basicConfig(force=True, format="mine: %(message)s", level=logging.INFO)
    logging.getLogger("lab.job").info(message)


def append_line(path: str, text: str) -> int:
    """Append ``text`` as a line to ``path``: a record of each time this job ran."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(text + "\n")
    return os.getpid()


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


def wait_for_file(path: str, seconds: float) -> bool:
    """Run until ``path`` exists (a test's gate), at most ``seconds``; whether it appeared."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def add_once_open(gate: str, a: int, b: int) -> int:
    """``a + b``, once ``gate`` exists: holds its slot until a test lets it go."""
    if not wait_for_file(gate, 120):
        raise JobFailed(f"{gate} never appeared")
    return a + b


def report_and_sleep(seconds: float) -> None:
    """Tell the worker this job's process group, then wait to be killed."""
    progress.report(0.1, f"pgid={os.getpgid(0)}")
    time.sleep(seconds)


def burn_cpu_in_a_subprocess(seconds: float) -> None:
    """Run a process that spins for ``seconds`` of CPU, and wait for it."""
    spin_for = (
        f"import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass"
    )
    subprocess.run([sys.executable, "-c", spin_for], check=True)


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


# -- hostile payloads for the acceptance tier (the real taskq-worker) ----------------

WORKER_TAG_ENV = "TASKQ_TEST_WORKER_TAG"
"""Set by the acceptance tier in each worker's environment; its jobs inherit it."""


def allocate(nbytes: int) -> int:
    """Allocate and touch ``nbytes`` of memory, 64 MiB at a time (the pages are really used)."""
    chunk = 64 << 20
    held = []
    total = 0
    while total < nbytes:
        size = min(chunk, nbytes - total)
        held.append(b"\x01" * size)
        total += size
    return total


def print_bytes(nbytes: int) -> int:
    """Write ``nbytes`` of numbered lines to stdout, in 64 KiB writes."""
    line_bytes = 16
    lines_per_write = (64 << 10) // line_bytes
    written = 0
    line = 0
    while written < nbytes:
        block = "".join(f"line {n:010d}\n" for n in range(line, line + lines_per_write))
        line += lines_per_write
        written += os.write(1, block.encode())
    return written


def abort() -> None:
    os.abort()


def ignore_sigterm_and_sleep(seconds: float) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(seconds)


def write_grandchild_pid_and_sleep(path: str, seconds: float) -> int:
    """Start a ``sleep 1000`` that outlives this job unless killed; write its pid to ``path``."""
    grandchild = subprocess.Popen(["sleep", "1000"])
    partial = f"{path}.partial"
    with open(partial, "w") as out:
        out.write(str(grandchild.pid))
    os.replace(partial, path)
    time.sleep(seconds)
    return grandchild.pid


def big_result(nbytes: int) -> str:
    return "x" * nbytes


def sleep_and_identify(seconds: float) -> dict[str, object]:
    """Sleep, then say which worker ran this (its tag, and its pid: the keeper's parent)."""
    time.sleep(seconds)
    return {"worker": os.environ.get(WORKER_TAG_ENV), "worker_pid": parent_of(os.getppid())}


def parent_of(pid: int) -> int:
    """The parent pid of ``pid``, from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return int(stat.read().rsplit(b")", 1)[1].split()[1])


def dereference_null() -> None:
    """A real segmentation fault: read address 0 from C."""
    import ctypes

    ctypes.string_at(0)


def lower_hard_open_files(limit: int) -> list[int]:
    """Lower this process's hard limit on open files (allowed without privileges)."""
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    return list(resource.getrlimit(resource.RLIMIT_NOFILE))


def soft_limits() -> dict[str, int]:
    """The soft limits this job runs under."""
    import resource

    open_files, open_files_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {
        "open_files": open_files,
        "open_files_hard": open_files_hard,
        "memory_bytes": resource.getrlimit(resource.RLIMIT_AS)[0],
    }


def scheduling_policy() -> int:
    return os.sched_getscheduler(0)


def cpu_affinity() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def running_span() -> list[float]:
    """When this job ran: its wall-clock start and end."""
    started = time.time()
    return [started, time.time()]


# -- containment: jobs that try to outlive their worker, lease or policy ----------------


def _write_atomically(path: str, text: str) -> None:
    partial = f"{path}.partial"
    with open(partial, "w") as out:
        out.write(text)
    os.replace(partial, path)


def record_pid_and_sleep(path: str, seconds: float) -> int:
    """Write this process's pid to ``path``, then sleep (to be killed, normally)."""
    _write_atomically(path, str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


def start_daemon(path: str) -> int:
    """Start a daemon the classic way (fork, setsid, fork again), write its pid, return.

    The daemon leaves the job's process group and session, and its parent
    exits, so it is re-parented away from the job: it outlives the job
    unless something adopts and kills it.
    """
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            _write_atomically(path, str(os.getpid()))
            time.sleep(1000)
        os._exit(0)
    os.waitpid(first, 0)
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(open(path).read())


def environment() -> dict[str, str]:
    """The environment this job sees."""
    return dict(os.environ)


# The standard library's os.system under a name in this module: a worker that runs
# this module's functions must still refuse it, as it is not defined here.
run_command = os.system


def fork_until_refused(most: int) -> int:
    """Start sleeping children until the system refuses a fork (or ``most`` are running).

    A fork bomb that stops at the first refusal: the count says where the
    job's process cap lies. The children sleep until they are killed.
    """
    started = 0
    while started < most:
        try:
            pid = os.fork()
        except BlockingIOError:
            return started
        if pid == 0:
            time.sleep(1000)
            os._exit(0)
        started += 1
    return started


# -- jobs that lift the limits they were given, then go past them ------------------------


def _lift(limit: int) -> None:
    """Raise this process's ``limit`` as far as it allows: to unlimited, else to its hard one."""
    import resource

    try:
        resource.setrlimit(limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        hard = resource.getrlimit(limit)[1]
        resource.setrlimit(limit, (hard, hard))


def lift_cpu_limit_and_spin(seconds: float) -> None:
    """Raise RLIMIT_CPU, then spin for ``seconds`` of CPU time."""
    import resource

    _lift(resource.RLIMIT_CPU)
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def lift_memory_limit_and_allocate(nbytes: int) -> int:
    """Raise RLIMIT_AS, then allocate and touch ``nbytes``."""
    import resource

    _lift(resource.RLIMIT_AS)
    return allocate(nbytes)


def lift_open_files_limit_and_open(most: int) -> int:
    """Raise RLIMIT_NOFILE, then open /dev/null until refused (or ``most`` times): how many."""
    import resource

    _lift(resource.RLIMIT_NOFILE)
    opened: list[int] = []
    try:
        while len(opened) < most:
            opened.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for fd in opened:
        os.close(fd)
    return len(opened)


def lift_process_limit_and_fork(most: int) -> int:
    """Raise RLIMIT_NPROC, then fork until refused (see ``fork_until_refused``)."""
    import resource

    _lift(resource.RLIMIT_NPROC)
    return fork_until_refused(most)


def send_own_message(message: dict[str, object], then_sleep: float) -> None:
    """Write ``message`` to the child's control socket, as only the child itself should."""
    from taskq.worker.sandbox import protocol

    control_fd = int(sys.argv[sys.argv.index("--control-fd") + 1])
    os.write(control_fd, protocol.encode_message(message))
    time.sleep(then_sleep)
