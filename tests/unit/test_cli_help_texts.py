"""What a command's ``--help`` promises is what the command does."""

from __future__ import annotations

import pytest

from taskq.cli.main import build_parser


def test_limit_rate_help_says_it_is_a_token_bucket(capsys: pytest.CaptureFixture[str]) -> None:
    """The claim refills a bucket of N at N per period (claims.sql): a burst of N, then N more
    within the same period, so "at most N per period" would promise a window it does not keep."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["limit", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "a token bucket of N job starts, refilled at N per period" in shown
    assert "up to 2N-1" in shown
    assert "at most N job starts per period" not in shown
