"""``taskq queue show`` tells the config file's ``[queues.NAME]`` defaults too: the jobs
this machine submits get them, so the store's alone would misstate what such a job gets."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_runs import ok, one_error_line, taskq

JOBS = "tests.support.jobs"
CONFIG = """\
[queues.img]
max_attempts = 5
timeout = 600

[queues.img.limits]
memory_bytes = "2GiB"

[queues.video]
retry = { base = 10, retry_on = ["OSError"] }
"""


def test_queue_show_names_the_config_files_defaults_beside_the_stores(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    config = tmp_path / "config.toml"
    config.write_text(CONFIG, encoding="utf-8")
    given = ("--config", str(config))
    ok(*given, "submit", "--unchecked", f"{JOBS}:echo", "1", "--queue", "img", store=url)

    shown = ok(*given, "queue", "show", "img", store=url).out
    assert shown == (
        "queue img: no job defaults in the store\n"
        f"this machine's config file {config} gives the jobs submitted from here, "
        "before the store's defaults:\n"
        "  limits: memory_bytes=2GiB\n"
        "  max_attempts: 5\n"
        "  timeout: 10m\n"
    )
    as_json = ok(*given, "queue", "show", "img", "--json", store=url).json()
    assert as_json["job_defaults"] == {}
    assert as_json["config_file"] == str(config)
    assert as_json["config_defaults"] == {
        "limits": {"memory_bytes": "2GiB"},
        "max_attempts": 5,
        "timeout": 600.0,
    }

    # A queue the config file names, with no jobs yet: its defaults, not a refusal.
    video = ok(*given, "queue", "show", "video", store=url).out
    assert video.startswith("queue video: not in the store yet (no jobs, no settings)\n")
    assert "  retry: first after 10s, then x2 each time" in video

    # Without the config file, what the store alone gives, as before.
    assert ok("queue", "show", "img", store=url).out == (
        "queue img: no job defaults (3 attempts, no timeout, the worker's limits)\n"
    )
    one_error_line(taskq("queue", "show", "video", store=url), 1, "no queue named 'video'")
