from __future__ import annotations

import pytest

from taskq import errors
from taskq.worker.prefetch import AHEAD_SECONDS, Prefetch
from taskq.worker.settings import settings_from


def test_nothing_is_claimed_ahead_before_a_job_and_a_round_were_seen() -> None:
    prefetch = Prefetch(slots=8, most=16)
    assert prefetch.jobs == 0
    prefetch.job_ran(0.001)
    assert prefetch.jobs == 0
    prefetch.round_took(0.004)
    assert prefetch.jobs == 16


def test_claims_ahead_what_the_slots_start_within_the_horizon() -> None:
    prefetch = Prefetch(slots=4, most=100)
    prefetch.job_ran(0.010)
    prefetch.round_took(0.005)
    # Rounds are shorter than the horizon: each slot starts 10 jobs within it.
    assert AHEAD_SECONDS == 0.1
    assert prefetch.jobs == 40


def test_a_round_longer_than_the_horizon_sets_how_far_ahead() -> None:
    prefetch = Prefetch(slots=4, most=1000)
    prefetch.job_ran(0.010)
    prefetch.round_took(0.2)
    assert prefetch.jobs == 80


def test_slack_is_how_long_the_held_jobs_outlast_a_round_trip() -> None:
    prefetch = Prefetch(slots=2, most=100)
    assert prefetch.slack(50) is None  # nothing claimed ahead yet
    prefetch.job_ran(0.002)
    prefetch.round_took(0.010)
    # 20 jobs on 2 slots last 20 ms: 10 ms more than a round trip.
    assert prefetch.slack(20) == pytest.approx(0.010)
    assert prefetch.slack(10) == pytest.approx(0.0)
    for _ in range(20):
        prefetch.job_ran(1.0)
    assert prefetch.slack(20) is None  # long jobs: none claimed ahead, reports go promptly


def test_no_slack_once_a_claim_found_the_queues_drained() -> None:
    prefetch = Prefetch(slots=2, most=100)
    prefetch.job_ran(0.002)
    prefetch.round_took(0.010)
    prefetch.claim_came(100, 100)
    assert prefetch.slack(10) == pytest.approx(0.0)
    # Fewer came than asked for: no claim would refill the slots, so no hurry.
    prefetch.claim_came(3, 100)
    assert prefetch.slack(10) is None
    assert prefetch.jobs == 100  # still claims ahead, should jobs come again
    prefetch.claim_came(100, 100)
    assert prefetch.slack(10) == pytest.approx(0.0)


def test_reports_linger_a_round_trip_only_once_the_queues_are_drained() -> None:
    prefetch = Prefetch(slots=2, most=100)
    assert prefetch.linger() == 0.0  # no round measured yet
    prefetch.job_ran(0.002)
    prefetch.round_took(0.010)
    prefetch.claim_came(100, 100)
    assert prefetch.linger() == 0.0  # jobs remain: the claim with the reports refills
    prefetch.claim_came(3, 100)
    assert prefetch.linger() == pytest.approx(0.010)
    prefetch.claim_came(100, 100)
    assert prefetch.linger() == 0.0


def test_long_jobs_get_nothing_claimed_ahead() -> None:
    prefetch = Prefetch(slots=8, most=16)
    prefetch.round_took(0.005)
    # Long: the 8 slots start fewer than one job within the horizon.
    prefetch.job_ran(1.0)
    assert prefetch.jobs == 0


def test_the_averages_follow_a_change_in_job_length() -> None:
    prefetch = Prefetch(slots=8, most=16)
    prefetch.round_took(0.005)
    prefetch.job_ran(0.001)
    assert prefetch.jobs == 16
    for _ in range(20):
        prefetch.job_ran(1.0)
    assert prefetch.jobs == 0


def test_prefetch_zero_never_claims_ahead() -> None:
    prefetch = Prefetch(slots=8, most=0)
    prefetch.job_ran(0.0)
    prefetch.round_took(0.005)
    assert prefetch.jobs == 0


def test_prefetch_defaults_to_256_or_four_times_the_concurrency_if_more() -> None:
    assert settings_from({"concurrency": 3}).most_prefetch == 256
    assert settings_from({"concurrency": 80}).most_prefetch == 320
    assert settings_from({"concurrency": 3, "prefetch": 0}).most_prefetch == 0
    assert settings_from({"concurrency": 3, "prefetch": 5}).most_prefetch == 5


@pytest.mark.parametrize("value", [-1, 1.5, True, "4"])
def test_a_bad_prefetch_is_a_config_error(value: object) -> None:
    with pytest.raises(errors.ConfigError, match="prefetch must be a whole number >= 0"):
        settings_from({"prefetch": value})


@pytest.mark.parametrize("value", [0, 2.5, False, "4"])
def test_a_bad_child_queue_is_a_config_error(value: object) -> None:
    with pytest.raises(errors.ConfigError, match="child_queue must be a whole number >= 1"):
        settings_from({"child_queue": value})
