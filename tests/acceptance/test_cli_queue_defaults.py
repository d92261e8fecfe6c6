"""``taskq queue set|show``: a queue's job defaults from the command line."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_runs import ok, one_error_line, taskq

JOBS = "tests.support.jobs"


def test_queue_defaults_are_set_shown_lifted_and_given_to_new_jobs(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    one_error_line(taskq("queue", "set", "img", "--timeout", "10m", store=url), 1, "--create")
    one_error_line(taskq("queue", "show", "img", store=url), 1, "no queue named 'img'")
    ok(
        "queue",
        "set",
        "img",
        "--create",
        "--timeout",
        "10m",
        "--max-attempts",
        "5",
        "--memory",
        "1GiB",
        "--retry-base",
        "30",
        "--retry-on",
        "OSError",
        store=url,
    )
    shown = ok("queue", "set", "img", "--timeout", "none", "--json", store=url).json()
    defaults = shown["job_defaults"]
    assert "timeout" not in defaults
    assert (defaults["max_attempts"], defaults["limits"]) == (5, {"memory_bytes": "1GiB"})
    assert (defaults["retry"]["base"], defaults["retry"]["retry_on"]) == (30.0, ["OSError"])
    job_id = ok(
        "submit", "--unchecked", f"{JOBS}:echo", "1", "--queue", "img", store=url
    ).out.strip()
    job = ok("status", job_id, "--json", store=url).json()
    assert (job["max_attempts"], job["limits"]) == (5, {"memory_bytes": "1GiB"})
    assert job["retry"]["retry_on"] == ["OSError"]
    assert (
        "retry"
        not in ok("queue", "set", "img", "--retry", "none", "--json", store=url).json()[
            "job_defaults"
        ]
    )
    assert "max_attempts: 5" in ok("queue", "show", "img", store=url).out

    one_error_line(
        taskq("queue", "set", "img", "--max-attempts", "0", store=url), 2, "max_attempts"
    )


def test_queue_show_writes_durations_short_and_the_retry_policy_in_words(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    ok(
        "queue",
        "set",
        "img",
        "--create",
        *("--timeout", "90m", "--memory", "1GiB", "--cpu", "90"),
        store=url,
    )
    ok("queue", "set", "img", "--retry-factor", "3", "--retry-base", "30", store=url)
    assert ok("queue", "show", "img", store=url).out.splitlines() == [
        "queue img:",
        "  limits: cpu_seconds=90, memory_bytes=1GiB",
        "  retry: first after 30s, then x3 each time, at most 1h, jitter ±25%",
        "  timeout: 1h30m",
    ]
    # Any retry option sets the whole policy (the rest take their defaults).
    retry = ("--retry-base", "0.5", "--retry-on", "OSError", "--dont-retry-on", "KeyError")
    ok("queue", "set", "img", "--timeout", "0.5", *retry, store=url)
    shown = ok("queue", "show", "img", store=url).out.splitlines()
    assert shown[2:] == [
        "  retry: first after 0.5s, then x2 each time, at most 1h, jitter ±25%; "
        "only on OSError; never on KeyError",
        "  timeout: 0.5s",
    ]
    assert ok("queue", "show", "img", "--json", store=url).json()["job_defaults"]["timeout"] == 0.5
    one_error_line(taskq("queue", "set", "img", "--retry-on", "3bad", store=url), 2, "retry_on")


def test_the_config_files_queue_defaults_go_with_a_job_the_command_line_submits(
    tmp_path: Path,
) -> None:
    # As they do with a script's on this machine (taskq.Client reads the same file).
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    config = tmp_path / "config.toml"
    config.write_text("[queues.img]\nmax_attempts = 5\ntimeout = 600\n", encoding="utf-8")
    submitted = taskq(
        "--config",
        str(config),
        "submit",
        "--unchecked",
        f"{JOBS}:echo",
        "1",
        "--queue",
        "img",
        store=url,
    )
    assert submitted.code == 0, submitted
    shown = ok("--config", str(config), "status", submitted.out.strip(), "--json", store=url)
    assert (shown.json()["max_attempts"], shown.json()["timeout"]) == (5, 600), shown.out
