"""A ``[queues.NAME.limits]`` table is checked when the config file is read, not at the
first submit to that queue; a queue's setting written in the wrong place is said where it goes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from taskq import errors
from taskq.broker.limits import FORMS
from taskq.config import QueueLimits, load_config


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        (
            'memroy = "2GiB"',
            "[queues.img.limits] unknown key(s) memroy in [queues.img.limits]; known: cpu_seconds",
        ),
        ('memroy = "2GiB"', "; did you mean memory_bytes?"),
        ("cpus = 2", "; did you mean cpu_seconds?"),
        ('memory_bytes = "2 gigs"', "[queues.img.limits] memory_bytes must be a whole number > 0"),
        ("memory_bytes = 0", "memory_bytes must be a whole number > 0 or a size such as"),
        ('cpu_seconds = "2GiB"', "[queues.img.limits] cpu_seconds must be a whole number > 0"),
        ("wall_seconds = -1", "[queues.img.limits] wall_seconds must be a number > 0"),
        ("processes = true", "[queues.img.limits] processes must be a whole number > 0"),
    ],
)
def test_a_bad_limit_is_refused_as_the_file_is_read(
    tmp_path: Path, table: str, complaint: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[queues.img]\ntimeout = 60\n\n[queues.img.limits]\n{table}\n")
    with pytest.raises(errors.ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert complaint in str(caught.value)


def test_good_limits_are_kept_as_written(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[queues.img.limits]\nmemory_bytes = '2GiB'\noutput_bytes = 4096\n"
        "cpu_seconds = 60\nwall_seconds = 1.5\nresult_bytes = ' 1 mib '\n"
    )
    limits = load_config(path).queues["img"].limits
    assert limits == {
        "memory_bytes": "2GiB",
        "output_bytes": 4096,
        "cpu_seconds": 60,
        "wall_seconds": 1.5,
        "result_bytes": " 1 mib ",
    }


def test_the_config_knows_every_limit_a_job_may_set() -> None:
    # The config may not import the broker's parser: its own names must stay the same.
    assert {field.name for field in msgspec.structs.fields(QueueLimits)} == set(FORMS)


@pytest.mark.parametrize(
    ("table", "hint"),
    [
        (
            "max_running = 4",
            "; max_running is set in the store, for every client: taskq limit img --max-running N",
        ),
        (
            "rate = '10/1s'",
            "; rate is set in the store, for every client: taskq limit img --rate N/PERIOD",
        ),
        ("paused = true", "; paused is set in the store, for every client: taskq pause img"),
        ("memory_bytes = '1GiB'", "; memory_bytes goes under [queues.img.limits]"),
        (
            "memory_bytes = '1GiB'\ncpu_seconds = 3",
            "; cpu_seconds, memory_bytes go under [queues.img.limits]",
        ),
    ],
)
def test_a_key_that_belongs_elsewhere_is_said_where(tmp_path: Path, table: str, hint: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[queues.img]\n{table}\n")
    with pytest.raises(errors.ConfigError) as caught:
        load_config(path)
    assert str(caught.value).endswith(hint)
