"""``taskq token``: a new token is printed once, the config keeps its hash, and serve takes it."""

from __future__ import annotations

import hashlib
import stat
import time
import tomllib
from pathlib import Path

import pytest

import taskq as taskq_module
from taskq.cli.main import build_parser
from taskq.dev.server import running_server
from tests.support.cli_runs import one_error_line, taskq


def _config(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text())


def test_a_new_token_is_printed_once_and_only_its_hash_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "config.toml"
    made = taskq("token", "new", "scripts", "--scopes", "submit,read", "--config", str(path))
    assert made.code == 0, made
    token = made.out.strip()
    assert made.out == token + "\n"
    assert token.startswith("tq_")
    assert "scripts" in made.err
    # A server started open is not closed by a new token: the note does not promise it.
    assert "started with none is open to every request until it is restarted" in made.err
    assert token not in path.read_text()
    [entry] = _config(path)["server"]["tokens"]  # type: ignore[index]
    assert entry == {
        "name": "scripts",
        "scopes": ["read", "submit"],
        "sha256": hashlib.sha256(token.encode()).hexdigest(),
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_token_joins_a_written_config_and_keeps_its_comments(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    original = '# my settings\n[server]\nlisten = "127.0.0.1:9000"\n\n[queues.images]\ntimeout = 60'
    path.write_text(original)
    assert taskq("token", "new", "ci", "--config", str(path)).code == 0
    assert path.read_text().startswith(original + "\n")
    listed = taskq("token", "list", "--json", "--config", str(path))
    assert listed.json() == [{"name": "ci", "scopes": ["read", "submit"], "kept_as": "sha256"}]


def test_bad_tokens_are_refused_and_the_file_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert taskq("token", "new", "ops", "--scopes", "admin", "--config", str(path)).code == 0
    before = path.read_text()
    # A taken name is a runtime error (exit 1), as a taken schedule name is; a bad one is a
    # usage error (exit 2).
    for args, code, fragment in [
        (("ops",), 1, "exists already"),
        (("two words",), 2, "token name"),
        (("viewer", "--scopes", "read,write"), 2, "--scopes"),
    ]:
        ran = taskq("token", "new", *args, "--config", str(path))
        one_error_line(ran, code, fragment)
        assert ran.out == ""
        assert path.read_text() == before


def test_a_config_that_cannot_take_an_entry_is_put_back(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    inline = '[server]\ntokens = [{name = "a", scopes = ["read"], token = "secret-a"}]\n'
    path.write_text(inline)
    ran = taskq("token", "new", "b", "--config", str(path))
    one_error_line(ran, 2, "add it by hand")
    assert ran.out == ""
    assert path.read_text() == inline


def test_serve_accepts_the_new_token_and_no_other(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    token = taskq("token", "new", "scripts", "--config", str(path)).out.strip()
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    with running_server(store, path, tmp_path / "serve.log") as server:
        job = {"target": "tests.support.jobs:add", "args": [1, 2], "unchecked": True}
        with server.client(None) as anonymous:
            assert anonymous.post("/jobs", json=job).status_code == 401
        with server.client(None) as http:
            http.headers["Authorization"] = f"Bearer {token}"
            answer = http.post("/jobs", json=job)
            assert answer.status_code == 201, answer.text
            job_id = answer.json()["id"]
            assert http.get(f"/jobs/{job_id}").json()["submitter"] == "scripts"


def test_revoke_takes_out_one_entry_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('# mine\n[server]\nlisten = "127.0.0.1:9000"\n')
    for name in ("a", "b", "c"):
        assert taskq("token", "new", name, "--config", str(path)).code == 0
    ran = taskq("token", "revoke", "b", "--config", str(path))
    assert ran.code == 0, ran
    assert ran.out == ""
    text = path.read_text()
    assert text.startswith('# mine\n[server]\nlisten = "127.0.0.1:9000"\n')
    assert [entry["name"] for entry in _config(path)["server"]["tokens"]] == ["a", "c"]  # type: ignore[index]
    # No such token is a runtime error, as no such job or schedule is.
    one_error_line(taskq("token", "revoke", "b", "--config", str(path)), 1, "no [[server.tokens]]")
    assert path.read_text() == text


def test_serve_follows_new_and_revoked_tokens_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    first = taskq("token", "new", "first", "--config", str(path)).out.strip()
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    with running_server(store, path, tmp_path / "serve.log") as server:

        def status(token: str) -> int:
            with server.client(None) as http:
                http.headers["Authorization"] = f"Bearer {token}"
                return http.get("/queues").status_code

        def becomes(token: str, code: int) -> bool:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if status(token) == code:
                    return True
                time.sleep(0.1)
            return False

        assert status(first) == 200
        second = taskq("token", "new", "second", "--config", str(path)).out.strip()
        assert becomes(second, 200)
        assert taskq("token", "revoke", "first", "--config", str(path)).code == 0
        assert becomes(first, 401)
        assert status(second) == 200
        # The last one revoked: refused, not opened to everyone.
        assert taskq("token", "revoke", "second", "--config", str(path)).code == 0
        assert becomes(second, 401)
        with server.client(None) as anonymous:
            assert anonymous.get("/queues").status_code == 401


def test_a_taken_name_says_how_to_free_it(tmp_path: Path) -> None:
    path = tmp_path / "my config.toml"
    assert taskq("token", "new", "scripts", "--config", str(path)).code == 0
    ran = taskq("token", "new", "scripts", "--config", str(path))
    # The command shown is one to paste: the same file, quoted for the shell.
    revoke = f"taskq token revoke scripts --config '{path}'"
    one_error_line(ran, 1, "exists already", f"revoke it first ({revoke}) or choose another name")
    assert taskq("token", "revoke", "scripts", "--config", str(path)).code == 0
    assert taskq("token", "new", "scripts", "--config", str(path)).code == 0


def test_token_help_leaves_out_store_which_it_does_not_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["token"], ["token", "new"], ["token", "list"], ["token", "revoke"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*command, "--help"])
        shown = capsys.readouterr().out
        assert "--config" in shown
        assert "--store" not in shown, shown
    # Still taken (unused), as from an alias that names the store for every command.
    path = tmp_path / "config.toml"
    ran = taskq("--store", "sqlite:///nowhere/taskq.db", "token", "list", "--config", str(path))
    assert ran.code == 0, ran


def test_a_token_read_whole_from_a_file_is_taken_and_never_shown(tmp_path: Path) -> None:
    """A token file ends in a newline (as ``taskq token new > file`` writes it): dropped,
    here as in Python; one a header cannot carry is refused at once, without showing it."""
    path = tmp_path / "config.toml"
    made = taskq("token", "new", "scripts", "--config", str(path)).out
    token_file = tmp_path / "scripts.tok"
    token_file.write_text(made)
    read_whole = token_file.read_text()
    assert read_whole.endswith("\n")
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    with running_server(store, path, tmp_path / "serve.log") as server:
        with taskq_module.Client(server.url, token=read_whole, timeout=10) as client:
            job_id = client.submit("tests.support.jobs:add", 1, 2, unchecked=True).id
            assert client.get(job_id).submitter == "scripts"
        listed = taskq("jobs", "--json", env={"TASKQ_STORE": server.url, "TASKQ_TOKEN": made})
        assert listed.code == 0, listed
        assert [job["id"] for job in listed.json()] == [job_id]
        secret = made.strip()
        spoiled = f"{secret[:10]}\x1b{secret[10:]}\n"
        refused = taskq("jobs", env={"TASKQ_STORE": server.url, "TASKQ_TOKEN": spoiled})
        one_error_line(
            refused,
            2,
            "the token in TASKQ_TOKEN cannot be sent in an HTTP header",
            f"character 11 of {len(secret) + 1} is a control character",
        )
        assert secret[:10] not in refused.err
        assert secret[10:] not in refused.err
        # A blank one is none: the server's refusal says to set it.
        blank = taskq("jobs", env={"TASKQ_STORE": server.url, "TASKQ_TOKEN": " \n"})
        one_error_line(blank, 1, "wants a token: set TASKQ_TOKEN")
