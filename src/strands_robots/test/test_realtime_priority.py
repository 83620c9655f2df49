"""Real-time scheduling by default when permitted: the rule, its log line and the busy-thread guard (no ROS).

The processes themselves (a child without the privilege, a child with it, a thread that spins, the node's
line) are in test_realtime_processes.py.
"""

from __future__ import annotations

import os

import pytest

from strands_robots.ros.realtime_guard import BusyRule, RealtimeGuard, ThreadSample, parse_stat, start_realtime
from strands_robots.ros.realtime_priority import (
    DEFAULT_PRIORITY,
    RT_PRIORITY_ENV,
    Decision,
    Privilege,
    apply_realtime_priority,
    decide,
    decide_realtime,
    parse_priority,
    take_realtime,
)

NONE = tuple  # no other thread in the process (threads=NONE: a callable returning ())
linux_only = pytest.mark.skipif(not hasattr(os, "SCHED_FIFO"), reason="no SCHED_FIFO on this platform")
FIFO = getattr(os, "SCHED_FIFO", 1)
OTHER = getattr(os, "SCHED_OTHER", 0)


def facts(**changes) -> Privilege:
    base = dict(has_fifo=True, max_priority=99, cap_sys_nice=False, euid=1000, rtprio_soft=0, rtprio_hard=0,
                rt_runtime_us=950000, rt_period_us=1000000)
    base.update(changes)
    return Privilege(**base)


# -- the value ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [(None, None), ("", None), ("  ", None), ("off", 0), (" OFF ", 0),
                                             ("0", 0), ("1", 1), (" 10 ", 10), ("99", 99)])
def test_the_value_is_the_default_off_or_a_priority(value, expected):
    assert parse_priority(value, 99) == expected


@pytest.mark.parametrize("value", ["high", "1.5", "-1", "100", "on"])
def test_a_bad_value_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=RT_PRIORITY_ENV):
        parse_priority(value, 99)
    with pytest.raises(ValueError, match=RT_PRIORITY_ENV):
        apply_realtime_priority({RT_PRIORITY_ENV: value}, privilege=facts(euid=0, cap_sys_nice=True),
                                set_scheduler=Recorder(), threads=NONE)


# -- the rule ----------------------------------------------------------------------------------------------------
def test_the_default_is_fifo_50_for_root_and_says_so():
    decision = decide(None, facts(euid=0, cap_sys_nice=True))
    assert decision.priority == DEFAULT_PRIORITY == 50 and not decision.warn and not decision.required
    assert decision.line.startswith("real-time scheduling: SCHED_FIFO 50 (")
    assert "root" in decision.line and "950000 of 1000000 us" in decision.line


def test_cap_sys_nice_without_root_is_enough():
    decision = decide("", facts(cap_sys_nice=True))
    assert decision.priority == 50 and "CAP_SYS_NICE" in decision.reason


def test_an_rlimit_rtprio_permits_the_default_and_a_lower_one_lowers_it():
    assert decide(None, facts(rtprio_soft=60, rtprio_hard=60)).priority == 50
    low = decide(None, facts(rtprio_soft=10, rtprio_hard=10))
    assert low.priority == 10 and "RLIMIT_RTPRIO 10, below the default 50" in low.line
    # the soft limit is raised to the hard one first: no privilege needed for that
    raised = decide(None, facts(rtprio_soft=0, rtprio_hard=70))
    assert raised.priority == 50 and raised.raise_rtprio_to == 50
    unlimited = decide("99", facts(rtprio_soft=1 << 30, rtprio_hard=1 << 30))
    assert unlimited.priority == 99 and "RLIMIT_RTPRIO unlimited" in unlimited.line


def test_without_the_privilege_the_default_stays_on_the_normal_scheduler_and_warns_why():
    decision = decide(None, facts(euid=1000, cap_sys_nice=False, rtprio_soft=0, rtprio_hard=0))
    assert decision.priority == 0 and decision.warn and not decision.required
    line = decision.line
    assert line.startswith("real-time scheduling: off, the normal scheduler (not permitted:")
    assert "no CAP_SYS_NICE and RLIMIT_RTPRIO 0" in line and "uid 1000" in line and "ulimit -r" in line
    assert f"{RT_PRIORITY_ENV}=off" in line


def test_off_is_off_without_a_warning():
    for value in ("off", "0"):
        decision = decide(value, facts(euid=0, cap_sys_nice=True))
        assert decision.priority == 0 and not decision.warn
        assert decision.line == f"real-time scheduling: off, the normal scheduler ({RT_PRIORITY_ENV}={value})"


def test_an_explicit_priority_is_required_and_its_refusal_is_an_error_naming_what_it_needs():
    setter = Recorder()
    with pytest.raises(ValueError) as info:
        apply_realtime_priority({RT_PRIORITY_ENV: "60"}, privilege=facts(rtprio_soft=50, rtprio_hard=50),
                                set_scheduler=setter, threads=NONE)
    assert f"{RT_PRIORITY_ENV}=60" in str(info.value) and "RLIMIT_RTPRIO of at least 60" in str(info.value)
    assert setter.calls == []  # never reached the system


def test_the_events_executor_keeps_the_normal_scheduler():
    decision = decide(None, facts(euid=0, cap_sys_nice=True), executor="events")
    assert decision.priority == 0 and decision.warn and "STRANDS_ROBOTS_EXECUTOR=events" in decision.reason
    assert decide("20", facts(euid=0, cap_sys_nice=True), executor="events").required
    assert decide(None, facts(euid=0, cap_sys_nice=True), executor="single").priority == 50


def test_without_kernel_rt_throttling_the_default_is_off_but_an_explicit_priority_is_taken():
    unthrottled = facts(euid=0, cap_sys_nice=True, rt_runtime_us=-1)
    default = decide(None, unthrottled)
    assert default.priority == 0 and "real-time throttling is off" in default.reason
    explicit = decide("30", unthrottled)
    assert explicit.priority == 30 and "throttling off" in explicit.line


def test_no_sched_fifo_on_the_platform_is_said():
    decision = decide(None, facts(has_fifo=False, max_priority=0, cap_sys_nice=True))
    assert decision.priority == 0 and "no SCHED_FIFO" in decision.reason


class Recorder:
    def __init__(self, error: "OSError | None" = None) -> None:
        self.calls: list = []
        self.error = error

    def __call__(self, pid, policy, param):
        self.calls.append((pid, policy, param.sched_priority))
        if self.error is not None:
            raise self.error


@linux_only
def test_a_permitted_decision_moves_the_calling_thread_to_fifo():
    setter = Recorder()
    decision = apply_realtime_priority({}, privilege=facts(euid=0, cap_sys_nice=True), set_scheduler=setter,
                                       threads=NONE)
    assert decision.priority == 50 and setter.calls == [(0, os.SCHED_FIFO, 50)]
    raised: list = []
    apply_realtime_priority({}, privilege=facts(rtprio_soft=0, rtprio_hard=20), set_scheduler=setter, threads=NONE,
                            raise_rtprio=raised.append)
    assert raised == [20] and setter.calls[-1] == (0, os.SCHED_FIFO, 20)


@linux_only
def test_a_system_refusal_of_the_default_falls_back_with_the_reason_and_of_an_explicit_priority_is_an_error():
    setter = Recorder(PermissionError(1, "Operation not permitted"))
    decision = apply_realtime_priority({}, privilege=facts(euid=0, cap_sys_nice=True), set_scheduler=setter,
                                       threads=NONE)
    assert decision.priority == 0 and decision.warn
    assert "refused SCHED_FIFO 50 (Operation not permitted)" in decision.line and "cgroup" in decision.line
    with pytest.raises(ValueError, match=rf"{RT_PRIORITY_ENV}=10: the system refused SCHED_FIFO 10"):
        apply_realtime_priority({RT_PRIORITY_ENV: "10"}, privilege=facts(euid=0, cap_sys_nice=True),
                                set_scheduler=setter, threads=NONE)


# -- the line ----------------------------------------------------------------------------------------------------
class Lines:
    def __init__(self) -> None:
        self.info_lines: list = []
        self.warning_lines: list = []

    def info(self, message: str) -> None:
        self.info_lines.append(message)

    def warning(self, message: str) -> None:
        self.warning_lines.append(message)


def test_one_line_either_way_a_warning_only_when_the_default_could_not_be_had():
    log = Lines()
    assert start_realtime(Decision(0, f"{RT_PRIORITY_ENV}=off"), log) is None
    assert log.info_lines == [f"real-time scheduling: off, the normal scheduler ({RT_PRIORITY_ENV}=off)"]
    log = Lines()
    start_realtime(decide(None, facts()), log)
    assert log.info_lines == [] and len(log.warning_lines) == 1 and "not permitted" in log.warning_lines[0]


def test_on_fifo_the_line_names_the_guard_and_the_guard_runs():
    log = Lines()
    guard = start_realtime(Decision(7, "every thread; permitted: root"), log, sample=lambda: [], window_s=0.01)
    try:
        assert guard is not None and guard.priority == 7
        assert log.info_lines == ["real-time scheduling: SCHED_FIFO 7 (every thread; permitted: root); guard: a "
                                  "thread on the CPU 90% of 3 x 0.01 s goes back to SCHED_OTHER"]
    finally:
        guard.stop()
    assert log.warning_lines == []


# -- the guard ---------------------------------------------------------------------------------------------------
def test_the_busy_rule_names_a_thread_only_after_its_windows_in_a_row():
    rule = BusyRule(windows=3, busy_share=0.9)
    assert rule.observe(1.0, {10: 0.95, 11: 0.05}) == []
    assert rule.observe(1.0, {10: 1.0, 11: 0.95}) == []
    assert rule.observe(1.0, {10: 0.91, 11: 0.10}) == [10]  # 11 slept in between: its streak started again
    assert rule.busy_s(10) == pytest.approx(2.86)
    rule.forget(10)
    assert rule.observe(1.0, {10: 1.0}) == []


def test_a_thread_that_leaves_the_samples_starts_again_from_zero():
    rule = BusyRule(windows=2, busy_share=0.5)
    assert rule.observe(1.0, {5: 0.9}) == []
    assert rule.observe(1.0, {}) == []
    assert rule.observe(1.0, {5: 0.9}) == []
    assert rule.observe(1.0, {5: 0.9}) == [5]


@pytest.mark.parametrize("windows, share", [(0, 0.9), (3, 0.0), (3, 1.5)])
def test_a_guard_rule_out_of_range_is_refused(windows, share):
    with pytest.raises(ValueError):
        BusyRule(windows, share)


def test_a_stat_line_gives_name_policy_and_cpu_even_with_parentheses_in_the_name():
    fields = ["S"] + [str(i) for i in range(4, 53)]  # fields 3.. of /proc/<pid>/task/<tid>/stat
    fields[14 - 3], fields[15 - 3], fields[41 - 3] = "120", "30", "1"
    sample = parse_stat(42, "42 (dds.shm (7411)) " + " ".join(fields))
    assert sample == ThreadSample(tid=42, name="dds.shm (7411)", policy=1, cpu_ticks=150)


def test_the_guard_demotes_the_real_time_thread_that_never_sleeps_and_reports_it_once():
    tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
    per_window = int(round(1.0 / tick_s))  # a whole window of ticks
    demoted: list = []
    reports: list = []
    guard = RealtimeGuard(50, reports.append, window_s=1.0, windows=2, busy_share=0.9, demote=demoted.append)
    cpu = {1: 0, 2: 0, 3: 0, 99: 0}
    previous: dict = {}
    for _ in range(4):
        cpu[1] += per_window  # spins, real-time
        cpu[2] += per_window // 50  # sleeps on its deadlines, real-time
        cpu[3] += per_window  # spins, but time-shared: not the guard's business
        cpu[99] += per_window  # the guard's own thread
        samples = [ThreadSample(1, "spinner", FIFO, cpu[1]), ThreadSample(2, "control", FIFO, cpu[2]),
                   ThreadSample(3, "worker", OTHER, cpu[3]), ThreadSample(99, "realtime-guard", FIFO, cpu[99])]
        previous = guard.check(previous, [s for s in samples if not (s.tid == 1 and demoted)], own_tid=99)
    assert demoted == [1]
    assert len(reports) == 1 and "'spinner' (1)" in reports[0] and "back on SCHED_OTHER" in reports[0]
    assert guard.demoted == reports


def test_a_thread_the_guard_cannot_demote_is_reported_and_the_watch_goes_on():
    def refuse(tid):
        raise ProcessLookupError(3, "No such process")

    reports: list = []
    guard = RealtimeGuard(50, reports.append, window_s=1.0, windows=1, busy_share=0.5, demote=refuse)
    ticks = int(os.sysconf("SC_CLK_TCK"))
    previous = guard.check({}, [ThreadSample(1, "gone", FIFO, 0)], own_tid=99)
    guard.check(previous, [ThreadSample(1, "gone", FIFO, ticks)], own_tid=99)
    assert reports == ["real-time guard: thread 'gone' (1) could not be put back: No such process"]


def test_the_camera_node_decides_by_its_own_variable_with_a_lower_default():
    from strands_robots.cameras.render_priority import CAMERA_RT_PRIORITY, CAMERA_RT_PRIORITY_ENV

    root = facts(euid=0, cap_sys_nice=True)
    setter = Recorder()
    taken = apply_realtime_priority({RT_PRIORITY_ENV: "off"}, privilege=root, set_scheduler=setter, threads=NONE,
                                    variable=CAMERA_RT_PRIORITY_ENV, default=CAMERA_RT_PRIORITY, executor="single")
    assert taken.priority == CAMERA_RT_PRIORITY == 10 < DEFAULT_PRIORITY and setter.calls[-1][2] == 10
    off = apply_realtime_priority({CAMERA_RT_PRIORITY_ENV: "off"}, privilege=root, set_scheduler=setter, threads=NONE,
                                  variable=CAMERA_RT_PRIORITY_ENV, default=CAMERA_RT_PRIORITY, executor="single")
    assert off.line == f"real-time scheduling: off, the normal scheduler ({CAMERA_RT_PRIORITY_ENV}=off)"
    with pytest.raises(ValueError, match=CAMERA_RT_PRIORITY_ENV):
        apply_realtime_priority({CAMERA_RT_PRIORITY_ENV: "max"}, privilege=root, set_scheduler=setter, threads=NONE,
                                variable=CAMERA_RT_PRIORITY_ENV, default=CAMERA_RT_PRIORITY, executor="single")
    assert f"{CAMERA_RT_PRIORITY_ENV}=off says" in decide(None, facts(), variable=CAMERA_RT_PRIORITY_ENV,
                                                          default=CAMERA_RT_PRIORITY).line


@linux_only
def test_taking_it_moves_the_calling_thread_first_then_every_thread_but_the_kept_ones_and_those_started_meanwhile():
    listings = iter([[1, 2, 3, 4], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]])  # 5 appears while the others are moved
    setter = Recorder()
    decision = take_realtime(Decision(40, "every thread; permitted: root"), keep={2}, set_scheduler=setter,
                             threads=lambda: next(listings))
    assert decision.priority == 40
    moved = [pid for pid, _policy, _prio in setter.calls]
    assert moved[0] == 0 and sorted(moved[1:]) == [1, 3, 4, 5]  # the calling thread, then all but 2 (kept)
    assert {prio for _pid, _policy, prio in setter.calls} == {40}


@linux_only
def test_when_the_system_refuses_the_calling_thread_no_other_thread_is_touched():
    setter = Recorder(PermissionError(1, "Operation not permitted"))
    decision = take_realtime(decide(None, facts(euid=0, cap_sys_nice=True)), set_scheduler=setter,
                             threads=lambda: [11, 12])
    assert decision.priority == 0 and setter.calls == [(0, os.SCHED_FIFO, 50)]
    explicit = decide_realtime({RT_PRIORITY_ENV: "7"}, privilege=facts(euid=0, cap_sys_nice=True))
    with pytest.raises(ValueError, match=rf"^{RT_PRIORITY_ENV}=7: the system refused SCHED_FIFO 7"):
        take_realtime(explicit, set_scheduler=setter, threads=lambda: [11, 12])


def test_deciding_takes_nothing_and_an_explicit_refusal_by_the_rule_is_an_error_before_anything_starts():
    assert decide_realtime({}, privilege=facts(euid=0, cap_sys_nice=True)).priority == 50
    with pytest.raises(ValueError, match=rf"^{RT_PRIORITY_ENV}=30: not permitted"):
        decide_realtime({RT_PRIORITY_ENV: "30"}, privilege=facts())
