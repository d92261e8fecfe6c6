"""Workers of one store starting in turns (taskq.worker.start_turns)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from taskq.worker.start_turns import StartTurn

STORE = "sqlite:///srv/lab/taskq.db"
# Long enough that a test never sees a waiting take give up on its own.
PATIENT = 60.0


def _take_in_thread(
    folder: Path, store: str, *, cpus: int, longest_wait: float
) -> tuple[threading.Event, list[StartTurn]]:
    """Take a turn in a thread; the event is set once it is taken (or given up on)."""
    done = threading.Event()
    taken: list[StartTurn] = []

    def take() -> None:
        taken.append(StartTurn.take(store, cpus=cpus, folder=folder, longest_wait=longest_wait))
        done.set()

    threading.Thread(target=take, daemon=True).start()
    return done, taken


def test_a_second_worker_of_a_store_starts_once_the_first_gives_its_turn_back(
    tmp_path: Path,
) -> None:
    first = StartTurn.take(STORE, cpus=2, folder=tmp_path)
    assert first.held
    done, taken = _take_in_thread(tmp_path, STORE, cpus=2, longest_wait=PATIENT)
    assert not done.wait(0.2)  # it waits
    first.give_back()
    assert done.wait(10.0)
    assert taken[0].held
    taken[0].give_back()


def test_a_machine_of_four_cpus_starts_two_workers_at_once(tmp_path: Path) -> None:
    first = StartTurn.take(STORE, cpus=4, folder=tmp_path)
    done, taken = _take_in_thread(tmp_path, STORE, cpus=4, longest_wait=PATIENT)
    assert done.wait(10.0)  # without the first giving its turn back
    assert first.held
    assert taken[0].held
    third_done, third = _take_in_thread(tmp_path, STORE, cpus=4, longest_wait=PATIENT)
    assert not third_done.wait(0.2)
    taken[0].give_back()
    assert third_done.wait(10.0)
    assert third[0].held
    for turn in (first, third[0]):
        turn.give_back()


def test_workers_of_another_store_start_beside_them(tmp_path: Path) -> None:
    first = StartTurn.take(STORE, cpus=2, folder=tmp_path)
    other = StartTurn.take("sqlite:///srv/other.db", cpus=2, folder=tmp_path, longest_wait=PATIENT)
    assert first.held
    assert other.held
    first.give_back()
    other.give_back()


def test_a_worker_starts_without_a_turn_once_its_holder_keeps_it_too_long(tmp_path: Path) -> None:
    holder = StartTurn.take(STORE, cpus=2, folder=tmp_path)
    late = StartTurn.take(STORE, cpus=2, folder=tmp_path, longest_wait=0.05)
    assert holder.held
    assert not late.held  # started anyway, holding nothing
    holder.give_back()


def test_a_dead_holders_turn_goes_with_its_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from taskq.worker.start_turns import StartTurn;"
            f"t = StartTurn.take({STORE!r}, cpus=2, folder=Path(sys.argv[1]));"
            "print(t.held, flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "True"
        done, taken = _take_in_thread(tmp_path, STORE, cpus=2, longest_wait=PATIENT)
        assert not done.wait(0.2)
        holder.kill()
        assert done.wait(10.0)
        assert taken[0].held
        taken[0].give_back()
    finally:
        holder.kill()
        holder.wait()


def test_giving_back_twice_or_a_turn_never_held_is_harmless(tmp_path: Path) -> None:
    turn = StartTurn.take(STORE, cpus=2, folder=tmp_path)
    turn.give_back()
    turn.give_back()
    StartTurn(None).give_back()
    assert StartTurn.take(STORE, cpus=2, folder=tmp_path).held


def test_the_lock_files_do_not_name_the_store(tmp_path: Path) -> None:
    # A store's URL may hold a password.
    StartTurn.take("rqlite://admin:secret@10.0.0.1:4001", cpus=2, folder=tmp_path).give_back()
    names = [path.name for path in tmp_path.iterdir()]
    assert names
    assert not any("secret" in name or "admin" in name for name in names)


def test_a_turn_folder_others_may_enter_takes_no_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another user able to take the lock could hold every start up to its bound.
    (tmp_path / "taskq").mkdir(mode=0o755)
    (tmp_path / "taskq").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    first = StartTurn.take(STORE, cpus=2)
    second = StartTurn.take(STORE, cpus=2, longest_wait=PATIENT)  # at once
    assert not first.held
    assert not second.held
    assert list((tmp_path / "taskq").iterdir()) == []


def test_the_users_runtime_folder_holds_the_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    turn = StartTurn.take(STORE, cpus=2)
    try:
        assert turn.held
        assert (tmp_path / "taskq").stat().st_mode & 0o777 == 0o700
        assert [path.name.startswith("start-") for path in (tmp_path / "taskq").iterdir()] == [True]
    finally:
        turn.give_back()
