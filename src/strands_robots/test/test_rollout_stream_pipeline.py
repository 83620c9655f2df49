"""Asynchronous verdicts: the in-order completion rules (pure) and the control loop over them (fake time).

rollout/pipeline.py: a step's event waits for its own verdict, in step order, with dense event_seq; a full
window or an overdue verdict holds the loop (budget clock paused, held deadlines missed); a lost or missing
verdict is unknown; every step sent is reported before the one Ended on every exit. No ROS, no waiting: the
backend's verdicts arrive on a deterministic clock the test controls.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from strands_robots.arm.verdict import REASON_STALE, REASON_UNKNOWN_KEY, ActionVerdict
from strands_robots.rollout.pipeline import InFlight, window_steps
from strands_robots.rollout.runner import PolicyRunner
from strands_robots.rollout.stop import StopToken
from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep

from rollout_fakes import KEYS, Collect, FakeBackend, FakeTime, ScriptedPolicy

MS = 1_000_000


# -- the pure rules ---------------------------------------------------------------------------------------------

def full(keys=KEYS) -> ActionVerdict:
    return ActionVerdict(applied_keys=tuple(keys))


def test_steps_complete_in_step_order_whatever_order_their_verdicts_arrive_in():
    f = InFlight(max_outstanding=5, overdue_ns=50 * MS, verdict_bound_ns=500 * MS)
    for k in range(3):
        f.add(k, f"step{k}", k * MS)
    assert f.resolve(2, full()) is True  # 2 before 0 and 1: 0 and 1 were lost (rule 1)
    ready = f.pop_ready()
    assert [r.step for r in ready] == ["step0", "step1", "step2"]
    assert [r.verdict.is_coarse_error for r in ready] == [True, True, False]
    assert "step 1 was answered first" not in ready[0].verdict.error and "step 2 was answered first" in \
        ready[0].verdict.error
    assert f.lost == 2 and len(f) == 0


def test_a_resolved_step_waits_for_its_predecessors():
    f = InFlight(5, 50 * MS, 500 * MS)
    f.add(0, "a", 0)
    f.add(ActionVerdict.coarse("arm driver not available"), "b", 0)  # resolved at once: nothing was sent
    assert f.pop_ready() == []  # b waits for a
    f.resolve(0, full())
    assert [r.step for r in f.pop_ready()] == ["a", "b"]


def test_a_step_without_a_verdict_past_the_bound_is_unknown_naming_why():
    f = InFlight(5, 50 * MS, 500 * MS)
    f.add(7, "s", 0)
    assert f.expire(500 * MS, "arm driver /x silent") == 0
    assert f.expire(501 * MS, "arm driver /x silent") == 1
    (r,) = f.pop_ready()
    assert r.verdict.error == "no verdict for step 7 within 0.5 s: arm driver /x silent"
    assert f.resolve(7, full()) is False and f.unmatched == 1  # it came too late: the step stays unknown


def test_the_loop_holds_on_a_full_window_or_an_overdue_verdict():
    f = InFlight(max_outstanding=2, overdue_ns=50 * MS, verdict_bound_ns=500 * MS)
    f.add(0, "a", 0)
    assert f.hold_reason(10 * MS) == ""
    assert "after 51.0 ms" in f.hold_reason(51 * MS)  # one in flight, but overdue
    f.add(1, "b", 20 * MS)
    assert "2 commands in flight (window 2)" in f.hold_reason(30 * MS)
    f.resolve(0, full())
    assert f.hold_reason(30 * MS) == ""  # answered steps do not count, completed or not


@pytest.mark.parametrize("hz, steps", [(50, 2), (200, 10), (500, 25), (1000, 50), (5, 2)])
def test_the_window_is_fifty_ms_of_commands_and_at_least_two(hz, steps):
    assert window_steps(0.05, 1.0 / hz) == steps


# -- the control loop over an asynchronous backend -------------------------------------------------------------

class FakeWindow:
    """The backend's command window: each verdict arrives ``latency(ticket)`` s after its command (None: never)."""

    def __init__(self, t: FakeTime, latency, verdict=None, max_outstanding=3, overdue_s=0.05, bound_s=0.5):
        self.t = t
        self.latency = latency
        self.verdict = verdict or (lambda ticket, action: full(action))
        self.max_outstanding = max_outstanding
        self.overdue_ns = int(overdue_s * 1e9)
        self.verdict_bound_ns = int(bound_s * 1e9)
        self.submitted: list = []  # (ticket, time sent ns)
        self.lookaheads: list = []  # the rest of the chunk each command carried
        self._due: list = []  # (due ns, ticket, verdict)
        self.last_answer_ns = 0
        self.max_in_flight = 0

    def submit(self, action, lookahead=()):
        ticket = len(self.submitted)
        self.submitted.append((ticket, self.t.now_ns))
        self.lookaheads.append(tuple(lookahead))
        lat = self.latency(ticket, self.t.now_ns)
        if lat is not None:
            self._due.append((self.t.now_ns + int(lat * 1e9), ticket, self.verdict(ticket, action)))
        self.max_in_flight = max(self.max_in_flight, len(self._due))
        return ticket

    def _arrived(self):
        now = self.t.now_ns
        ready = sorted(d for d in self._due if d[0] <= now)
        self._due = [d for d in self._due if d[0] > now]
        if ready:
            self.last_answer_ns = now
        return [(ticket, verdict) for _, ticket, verdict in ready]

    def collect(self, timeout_s):
        got = self._arrived()
        if not got and timeout_s > 0:
            self.t.spend(timeout_s)
            got = self._arrived()
        return got

    def describe_silence(self):
        return "arm driver /fake silent"


class AsyncBackend(FakeBackend):
    def __init__(self, t: FakeTime, silence_s: float = 0.5, **window) -> None:
        super().__init__(clock=t.seconds)
        self.time = t
        self.silence_ns = int(silence_s * 1e9)
        self.window = FakeWindow(t, **window)

    def command_window(self):
        return self.window

    def send_action(self, action):  # the loop must not use it on this path
        raise AssertionError("send_action called on the asynchronous path")

    def fault_detail(self):
        w = self.window
        waiting = [s for s in w.submitted if s[1] > w.last_answer_ns] if w.submitted else []
        if waiting and self.time.now_ns - max(w.last_answer_ns, waiting[0][1]) > self.silence_ns:
            return "arm driver /fake silent: commands got no answer"
        return ""


def run(backend, t, policy=None, stop=None, **kwargs):
    collect = Collect()
    kwargs.setdefault("n_steps", 40)
    kwargs.setdefault("control_frequency", 100.0)
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait, stop=stop)
    result = runner.run(policy or ScriptedPolicy(), observer=collect, **kwargs)
    return result, collect


def lifecycle(collect):
    events = collect.events
    assert isinstance(events[0], RunPolicyStarted) and isinstance(events[-1], RunPolicyEnded)
    assert [e.event_seq for e in events] == list(range(len(events)))
    assert len(collect.of(RunPolicyEnded)) == 1
    steps = collect.of(RunPolicyStep)
    assert [s.applied_action_index for s in steps] == list(range(len(steps)))
    assert all(s.applied_action_index == s.legacy_step_index for s in steps)
    return steps, events[-1]


def test_each_step_event_carries_its_own_verdict_when_verdicts_arrive_periods_later():
    t = FakeTime()
    # Step k's verdict arrives 25 ms (2.5 periods) after its command; odd steps are refused stale.
    def verdict(ticket, action):
        if ticket % 2:
            return ActionVerdict((), tuple(action), (REASON_STALE,) * len(action))
        return full(action)

    backend = AsyncBackend(t, latency=lambda k, now: 0.025, verdict=verdict, max_outstanding=5)
    result, collect = run(backend, t, n_steps=20)
    steps, ended = lifecycle(collect)
    assert len(steps) == 20 == ended.applied_actions
    assert [s.action_resolution for s in steps] == ["full", "none"] * 10
    assert ended.full_count == 10 and ended.none_count == 10 and ended.unknown_count == 0
    assert ended.missed_deadlines == 0  # the loop never waited for a verdict
    # Commands went out while earlier verdicts were still on their way: the loop did not wait for them.
    assert backend.window.max_in_flight >= 3


def test_a_steps_hook_runs_at_its_send_and_its_event_after_the_next_command_has_gone():
    t = FakeTime()
    timeline: list = []

    class Window(FakeWindow):
        def submit(self, action, lookahead=()):
            timeline.append(("send", len(self.submitted), t.now_ns))
            return super().submit(action, lookahead)

    def on_frame(step, observation, action):
        timeline.append(("hook", step, t.now_ns))

    def on_event(event):
        if isinstance(event, RunPolicyStep):
            timeline.append(("report", event.applied_action_index, t.now_ns))

    # Each verdict arrives 1 ms after its command, during the wait for the next deadline (10 ms period).
    backend = AsyncBackend(t, latency=lambda k, now: 0.001, max_outstanding=5)
    backend.window.__class__ = Window
    collect = Collect(on_event)
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait)
    runner.run(ScriptedPolicy(), observer=collect, on_frame=on_frame, n_steps=20, control_frequency=100.0)
    steps, ended = lifecycle(collect)
    assert len(steps) == 20 == ended.applied_actions and ended.missed_deadlines == 0
    assert all(s.action_resolution == "full" for s in steps)
    order = [(kind, k) for kind, k, _ in timeline]
    for k in range(20):  # the hook right after its own send, before the next one (nothing sent after an abort)
        assert order.index(("send", k)) + 1 == order.index(("hook", k))
    for k in range(19):  # step k's event comes after step k + 1's send, not between its deadline and the send
        assert order.index(("send", k + 1)) < order.index(("report", k))
        if k + 2 < 20:  # ... and before the send after that (reported in the slack of the period)
            assert order.index(("report", k)) < order.index(("send", k + 2))
    # ... and the sends kept the grid: one period apart exactly on the fake clock.
    sends = [ns for kind, _, ns in timeline if kind == "send"]
    assert {b - a for a, b in zip(sends, sends[1:])} == {10 * MS}
    assert [k for kind, k, _ in timeline if kind == "report"] == list(range(20))


def test_a_starved_driver_holds_the_loop_with_the_budget_clock_paused_and_the_held_periods_missed():
    t = FakeTime()
    # From step 10 on the driver is starved for 0.3 s: nothing it answers arrives before then.
    starve = {}

    def latency(k, now):
        if k == 10:
            starve["until"] = now + int(0.3e9)
        if "until" in starve and now < starve["until"]:
            return (starve["until"] - now) / 1e9 + 0.001
        return 0.001

    backend = AsyncBackend(t, latency=latency, max_outstanding=3, overdue_s=0.05)
    result, collect = run(backend, t, n_steps=40)
    steps, ended = lifecycle(collect)
    assert ended.outcome == "ok" and ended.stopped_reason == "budget" and len(steps) == 40
    sent = backend.window.submitted
    during = [k for k, ns in sent if starve["until"] - int(0.3e9) <= ns < starve["until"]]
    assert len(during) <= 3, during  # the window, never the 30 periods of the starvation
    assert ended.paused_s >= 0.25  # the hold paused the budget clock (fake time)
    assert ended.missed_deadlines >= 25  # ... and its periods are reported as missed
    first_after = next(s for s in steps if s.applied_action_index == during[-1] + 1)
    assert first_after.deadline_missed
    assert ended.unknown_count == 0


def test_a_loop_held_on_each_verdict_never_sends_faster_than_the_control_rate():
    # The driver answers a command only once the next one has come (3 ms later), and the window is two commands:
    # every send fills the window, the loop holds until the verdict, and must still send one period apart, not
    # at the driver's 3 ms pace (a catch-up burst that tripped the velocity check over ROS).
    t = FakeTime()

    class Window(FakeWindow):
        def submit(self, action, lookahead=()):
            ticket = len(self.submitted)
            self.submitted.append((ticket, self.t.now_ns))
            if ticket > 0:
                self._due.append((self.t.now_ns + 3 * MS, ticket - 1, full(self._last_action)))
            self._last_action = action
            return ticket

    backend = AsyncBackend(t, latency=lambda k, now: None, max_outstanding=2, overdue_s=1.0, bound_s=0.2)
    backend.window.__class__ = Window
    result, collect = run(backend, t, n_steps=20)
    steps, ended = lifecycle(collect)
    sends = [ns for _, ns in backend.window.submitted]
    assert len(sends) == 20
    assert min(b - a for a, b in zip(sends, sends[1:])) >= 10 * MS, [(b - a) / MS for a, b in zip(sends, sends[1:])]
    assert ended.paused_s > 0  # the loop did hold (on the full window) between sends
    assert [s.action_resolution for s in steps[:-1]] == ["full"] * 19  # the last one is never answered


def test_a_driver_that_stops_answering_ends_the_episode_as_an_error_after_every_sent_step_is_reported():
    t = FakeTime()
    backend = AsyncBackend(t, latency=lambda k, now: 0.001 if k < 8 else None, max_outstanding=3)
    result, collect = run(backend, t, n_steps=400)
    steps, ended = lifecycle(collect)
    assert ended.outcome == "error" and ended.error_type == "DriverFault", ended.end_detail
    assert "arm driver /fake silent" in ended.end_detail
    assert len(steps) == ended.applied_actions == len(backend.window.submitted) <= 8 + 3
    unknown = [s for s in steps if s.action_resolution == "unknown"]
    assert [s.applied_action_index for s in unknown] == list(range(8, len(steps)))
    assert all(f"no verdict for step {s.applied_action_index}" in s.action_error for s in unknown)
    assert ended.unknown_count == len(unknown) == len(ended.action_errors)


def test_fail_fast_still_ends_the_episode_and_reports_the_steps_already_sent():
    t = FakeTime()

    def verdict(ticket, action):
        return ActionVerdict((), tuple(action), (REASON_UNKNOWN_KEY,) * len(action))

    backend = AsyncBackend(t, latency=lambda k, now: 0.025, verdict=verdict, max_outstanding=5)
    result, collect = run(backend, t, n_steps=50)
    steps, ended = lifecycle(collect)
    assert ended.error_type == "UnknownActionKeys" and result["status"] == "error"
    assert len(steps) == ended.applied_actions == len(backend.window.submitted) > 3
    assert all(s.action_resolution == "none" for s in steps)  # each with its own verdict, none unknown


def test_a_cancel_reports_the_steps_in_flight_with_their_own_verdicts():
    t = FakeTime()
    token = StopToken()
    t.at(0.105, lambda: token.request("goal cancelled"))
    backend = AsyncBackend(t, latency=lambda k, now: 0.025, max_outstanding=5)
    result, collect = run(backend, t, stop=token, n_steps=100)
    steps, ended = lifecycle(collect)
    assert ended.stopped_reason == "cancelled" and ended.end_detail == "goal cancelled"
    assert len(steps) == ended.applied_actions == len(backend.window.submitted)
    assert all(s.action_resolution == "full" for s in steps)
    assert ended.legacy_steps_used == len(steps)  # their hooks ran (recording, on_frame) after the stop


def test_a_takeover_during_a_hold_keeps_the_loop_held_until_resume():
    t = FakeTime()
    token = StopToken()
    runner_box = {}
    starve = {}

    def latency(k, now):
        if k == 5:
            starve["until"] = now + int(0.2e9)
            runner_box["r"].pause()  # the operator takes over while the loop is about to hold
            t.at(now / 1e9 + 0.5, runner_box["r"].resume)
        if "until" in starve and now < starve["until"]:
            return (starve["until"] - now) / 1e9
        return 0.001

    backend = AsyncBackend(t, latency=latency, max_outstanding=2)
    collect = Collect()
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait, stop=token)
    runner_box["r"] = runner
    policy = ScriptedPolicy()
    runner.run(policy, observer=collect, n_steps=20, control_frequency=100.0)
    steps, ended = lifecycle(collect)
    assert ended.outcome == "ok" and len(steps) == 20
    assert policy.resumed == 1  # the takeover's resume, once; the hold itself resumes nothing
    assert ended.paused_s >= 0.45


def test_ctrl_c_reports_the_steps_in_flight_without_waiting_and_ends_once():
    t = FakeTime()

    def on_act(n):
        if n == 2:
            raise KeyboardInterrupt()

    backend = AsyncBackend(t, latency=lambda k, now: 0.025, max_outstanding=5)
    collect = Collect()
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait)
    with pytest.raises(KeyboardInterrupt):
        runner.run(ScriptedPolicy(horizon=4, on_act=on_act), observer=collect, n_steps=40, control_frequency=100.0)
    steps, ended = lifecycle(collect)
    assert len(steps) == ended.applied_actions == len(backend.window.submitted) == 8
    late = [s for s in steps if s.action_resolution == "unknown"]
    assert late and all("interrupted by KeyboardInterrupt" in s.action_error for s in late)
    assert ended.outcome == "cancelled"


@pytest.mark.parametrize("abort_at", [0, 2, 7])
def test_after_a_hook_abort_no_command_is_sent_and_applied_exceeds_legacy_by_one(abort_at):
    from strands_robots.simulation.observers import CooperativeStop

    t = FakeTime()

    def on_frame(step, observation, action):
        if step == abort_at:
            raise CooperativeStop("operator stop")

    # verdicts come 2.5 periods late: when step abort_at's hook runs, earlier commands are still in flight
    backend = AsyncBackend(t, latency=lambda k, now: 0.025, max_outstanding=5)
    result, collect = run(backend, t, on_frame=on_frame, n_steps=40)
    steps, ended = lifecycle(collect)
    assert ended.stopped_reason == "cancelled"
    assert len(backend.window.submitted) == abort_at + 1  # nothing went out after the aborting step
    assert len(steps) == ended.applied_actions == abort_at + 1
    assert [s.legacy_hook_outcome for s in steps] == ["ok"] * abort_at + ["cancelled"]
    assert ended.applied_actions - ended.legacy_steps_used == 1
    assert all(s.action_resolution == "full" for s in steps)  # the ones in flight, each with its own verdict


def test_a_stop_between_sends_ends_the_episode_with_every_step_sent_used():
    t = FakeTime()
    token = StopToken()
    t.at(0.0551, lambda: token.request("goal cancelled"))  # after step 5's send, during the wait for step 6
    backend = AsyncBackend(t, latency=lambda k, now: 0.025, max_outstanding=5)
    result, collect = run(backend, t, stop=token, n_steps=40)
    steps, ended = lifecycle(collect)
    assert ended.stopped_reason == "cancelled" and len(backend.window.submitted) == 6
    assert [s.legacy_hook_outcome for s in steps] == ["ok"] * 6
    assert ended.applied_actions == ended.legacy_steps_used == 6


def test_an_event_that_cannot_be_recorded_ends_the_stream_with_applied_exceeding_legacy_by_one(
        tmp_path, monkeypatch):
    from strands_robots.rollout import recording

    write_event = recording.EpisodeRecorder.write_event

    def failing_from_step_4(self, event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index >= 4:
            raise recording.RecordingError("writing failed: [Errno 28] No space left on device")
        write_event(self, event)

    monkeypatch.setattr(recording.EpisodeRecorder, "write_event", failing_from_step_4)
    t = FakeTime()
    backend = AsyncBackend(t, latency=lambda k, now: 0.025, max_outstanding=5)
    result, collect = run(backend, t, n_steps=40, record=True, recording_dir=str(tmp_path))
    steps, ended = lifecycle(collect)
    sent = len(backend.window.submitted)
    assert ended.outcome == "error" and "the event of step 4" in ended.end_detail, ended.end_detail
    assert sent > 5  # steps after 4 were in flight when its event failed
    assert len(steps) == ended.applied_actions == sent
    assert ended.applied_actions - ended.legacy_steps_used == 1
    assert [s.legacy_hook_outcome for s in steps] == ["ok"] * (sent - 1) + ["recording_error"]


def test_a_disk_that_fills_at_any_point_of_a_streamed_episode_never_lets_applied_exceed_legacy_by_more_than_one(
        tmp_path, monkeypatch):
    import errno
    import io

    from strands_robots.rollout import recording

    def full_disk_after(limit):
        class FullDisk(io.FileIO):
            def __init__(self, path):
                super().__init__(path, "xb")
                self.written = 0

            def write(self, data):
                room = limit - self.written
                if room <= 0:
                    raise OSError(errno.ENOSPC, "No space left on device")
                n = super().write(memoryview(data)[:room])
                self.written += n
                return n
        return FullDisk

    def episode(directory):
        t = FakeTime()
        backend = AsyncBackend(t, latency=lambda k, now: 0.025, max_outstanding=5)
        result, collect = run(backend, t, n_steps=200, record=True, recording_dir=str(directory))
        return result, collect, backend

    result, _, _ = episode(tmp_path / "full")
    size = Path(result["episodes"][0]["recording_path"]).stat().st_size
    failed = []
    for i, fraction in enumerate(x / 12 for x in range(1, 12)):
        monkeypatch.setattr(recording, "_default_raw", full_disk_after(int(size * fraction)))
        result, collect, backend = episode(tmp_path / f"fill{i}")
        if not result["episodes"]:  # the header itself did not fit: refused before Started
            continue
        steps, ended = lifecycle(collect)
        assert len(steps) == ended.applied_actions == len(backend.window.submitted)
        assert 0 <= ended.applied_actions - ended.legacy_steps_used <= 1, (fraction, ended)
        aborted = [s.applied_action_index for s in steps if s.legacy_hook_outcome == "recording_error"]
        assert aborted in ([], [ended.applied_actions - 1]), aborted  # only ever the last step sent
        if ended.outcome == "error":
            failed.append(fraction)
    assert len(failed) >= 9


def test_each_command_carries_the_rest_of_its_chunk_as_its_lookahead():
    t = FakeTime()
    backend = AsyncBackend(t, latency=lambda k, now: 0.005, verdict=lambda k, a: full(a), max_outstanding=5)
    result, collect = run(backend, t, policy=ScriptedPolicy(horizon=4), n_steps=8)
    steps, ended = lifecycle(collect)
    assert len(steps) == 8 and ended.full_count == 8
    ahead = [[round(a[KEYS[0]], 6) for a in la] for la in backend.window.lookaheads]
    # a chunk of 4 actions (0.0, 0.1, 0.2, 0.3 per key): each step carries the chunk's actions after it
    assert ahead == [[0.1, 0.2, 0.3], [0.2, 0.3], [0.3], []] * 2
    assert all(set(a) == set(KEYS) for la in backend.window.lookaheads for a in la)
