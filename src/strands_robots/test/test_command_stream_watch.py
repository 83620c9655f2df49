"""DriverWatch, the rollout's dead-driver rule, on an injected clock (no ROS, no waiting)."""

from __future__ import annotations

import pytest

from strands_robots.rollout.driver_watch import SILENCE_MAX_S, DriverWatch, default_silence_s


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


def make(silence_s: float = 0.25) -> tuple[DriverWatch, Clock]:
    clock = Clock()
    return DriverWatch("arm driver /station_1", silence_s, clock_ns=clock), clock


def test_joint_states_older_than_the_bound_are_a_fault_naming_the_driver_and_the_silence():
    watch, clock = make(0.25)
    watch.joint_state()
    clock.advance(0.25)
    assert watch.fault() == "" and watch.stale_observation() == ""
    clock.advance(0.01)
    fault = watch.fault()
    assert fault.startswith("arm driver /station_1 silent: no joint_states for 0.260 s (limit 0.25 s)")
    assert watch.stale_observation() == fault


def test_a_new_joint_state_clears_the_fault():
    watch, clock = make(0.1)
    watch.joint_state()
    clock.advance(0.5)
    assert watch.fault()
    watch.joint_state()
    assert watch.fault() == ""


def test_unanswered_commands_past_the_bound_are_a_fault_while_joint_states_go_on():
    watch, clock = make(0.1)
    for _ in range(6):  # joint_states keep coming, commands go unanswered for 0.12 s
        watch.joint_state()
        watch.command_sent()
        clock.advance(0.024)
    watch.joint_state()
    fault = watch.fault()
    assert "6 command(s) over 0.144 s got no answer (limit 0.1 s)" in fault
    assert watch.stale_observation() == ""  # the observation itself is fresh


def test_an_answer_resets_the_unanswered_count():
    watch, clock = make(0.1)
    watch.joint_state()
    watch.command_sent()
    clock.advance(0.09)
    watch.answered()
    watch.command_sent()
    clock.advance(0.09)
    watch.joint_state()
    assert watch.fault() == ""  # the oldest unanswered command is 0.09 s old


def test_a_new_episode_forgets_the_last_episodes_unanswered_commands():
    watch, clock = make(0.1)
    watch.command_sent()
    clock.advance(1.0)
    watch.joint_state()
    assert watch.fault()
    watch.begin()
    assert watch.fault() == ""


def test_no_joint_state_yet_is_not_a_stale_observation():
    watch, clock = make(0.1)
    clock.advance(10.0)
    assert watch.stale_observation() == ""
    assert watch.joint_state_age_s() == float("inf")


@pytest.mark.parametrize("period_s, expected", [(1 / 1000, 0.5), (1 / 50, 0.5), (1 / 20, 0.5), (1.0, 0.5)])
def test_default_silence_is_ten_periods_within_the_floor_and_half_a_second(period_s, expected):
    assert default_silence_s(period_s) == pytest.approx(expected)
    assert default_silence_s(period_s) <= SILENCE_MAX_S


def test_a_bound_above_half_a_second_is_refused():
    with pytest.raises(ValueError, match="outside"):
        DriverWatch("d", 0.6)


def test_a_silence_quotes_the_drivers_last_error_answer_which_names_its_hardware_fault():
    watch, clock = make(0.1)
    watch.joint_state()
    watch.command_sent()
    fault_text = "adapter command failed: RuntimeError: joint_states on /joint_states stale: none for 0.26 s"
    watch.answered(fault_text + " " + "x" * 400)
    clock.advance(0.15)
    stale = watch.stale_observation()
    assert f"last answer 0.150 s ago (an error: {fault_text} " in stale
    assert len(stale) < 500  # the quote is cut
    watch.answered()  # a later plain answer: nothing to quote
    assert "an error" not in watch.fault()
