"""Small test doubles for the rollout loop.

A robot backend returning chosen verdicts, a scripted policy, an observer that keeps every event, an in-memory
recorder module, and deterministic time for the pacer.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any, Callable, Mapping

from strands_robots.arm.verdict import ActionVerdict

KEYS = ("a", "b")


class FakeBackend:
    """A RobotBackend whose verdicts a test chooses (``verdict(index, action) -> ActionVerdict`` or raises)."""

    def __init__(self, keys=KEYS, verdict: "Callable[[int, Mapping], Any] | None" = None,
                 safety_after: "int | None" = None, clock: "Callable[[], float] | None" = None) -> None:
        self.clock = clock or time.perf_counter
        self.keys = tuple(keys)
        self.verdict = verdict
        self.safety_after = safety_after
        self.t = 0.0
        self.sent: list = []
        self.send_times: list = []
        self.observations: list = []
        self.resets: list = []
        self.advances = 0

    def action_keys(self):
        return self.keys

    def observe(self):
        obs = {f"{k}.pos": 0.0 for k in self.keys}
        obs["sim_time_s"] = self.t
        self.observations.append(obs)
        return obs

    def send_action(self, action):
        index = len(self.sent)
        self.sent.append(action)
        self.send_times.append(self.clock())
        if self.verdict is not None:
            return self.verdict(index, action)
        return ActionVerdict(applied_keys=tuple(action))

    def reset(self, seed=None):
        self.resets.append(seed)
        self.t = 0.0

    def advance(self, dt):
        self.advances += 1
        self.t += dt

    def safety_stop_detail(self):
        if self.safety_after is not None and len(self.sent) >= self.safety_after:
            return "right: joint 4 reads +6.3 N*m"
        return ""


class ScriptedPolicy:
    """Constant actions over ``keys``; ``on_act(n_calls)`` may raise to end or fail the episode."""

    def __init__(self, keys=KEYS, horizon: int = 4, on_act: "Callable[[int], None] | None" = None) -> None:
        self.emit = tuple(keys)
        self.horizon = horizon
        self.on_act = on_act
        self.calls = 0
        self.resets = 0
        self.resumed = 0

    def reset(self, task):
        self.resets += 1
        self.calls = 0

    def act(self, observation):
        if self.on_act is not None:
            self.on_act(self.calls)
        self.calls += 1
        return [{k: 0.1 * i for k in self.emit} for i in range(self.horizon)]

    def resume(self, observation):
        self.resumed += 1


class Collect:
    """An observer keeping every event (and optionally doing something on each)."""

    def __init__(self, then: "Callable[[Any], None] | None" = None) -> None:
        self.events: list = []
        self.then = then

    def __call__(self, event):
        self.events.append(event)
        if self.then is not None:
            self.then(event)

    def of(self, cls):
        return [e for e in self.events if isinstance(e, cls)]


def fake_recording_module(fail_at_step: "int | None" = None):
    """Return a stand-in for ``strands_robots.rollout.recording`` keeping frames in memory."""
    mod = types.ModuleType("strands_robots.rollout.recording")

    class RecordingError(OSError):
        pass

    class RecordingRefused(ValueError):
        pass

    class EpisodeRecorder:
        opened: list = []

        def __init__(self, path):
            self.path = path
            self.frames: list = []
            self.events: list = []
            self.closed = False

        @classmethod
        def open(cls, path, *, control_frequency, fps, actuator_keys, robot_name="", topic_prefix=""):
            if fps != control_frequency:
                raise RecordingRefused(f"fps {fps} != control_frequency {control_frequency}")
            rec = cls(path)
            cls.opened.append(rec)
            return rec

        def write_step(self, step_index, stamp_ns, observation, action, verdict):
            if fail_at_step is not None and step_index == fail_at_step:
                raise RecordingError("disk full")
            self.frames.append((step_index, observation, action))

        def write_event(self, event):
            self.events.append(event)

        def close(self):
            self.closed = True
            return len(self.frames)

    mod.RecordingError = RecordingError
    mod.RecordingRefused = RecordingRefused
    mod.EpisodeRecorder = EpisodeRecorder
    return mod


def install_fake_recording(monkeypatch, fail_at_step=None):
    import strands_robots.rollout as rollout_pkg

    mod = fake_recording_module(fail_at_step)
    monkeypatch.setitem(sys.modules, "strands_robots.rollout.recording", mod)
    monkeypatch.setattr(rollout_pkg, "recording", mod, raising=False)
    return mod


class FakeTime:
    """Deterministic time for the pacer and the loop.

    ``clock()`` reads it, ``wait(event, timeout)`` (the pacer's sleep) advances it, ``spend(s)`` is work taking
    time, ``at(t_s, fn)`` runs ``fn`` when time reaches ``t_s``.
    """

    def __init__(self) -> None:
        self.now_ns = 0
        self.waits: list = []
        self._timers: list = []

    def clock(self) -> int:
        return self.now_ns

    def seconds(self) -> float:
        return self.now_ns / 1e9

    def spend(self, seconds: float) -> None:
        self._advance(int(round(seconds * 1e9)))

    def at(self, t_s: float, fn) -> None:
        self._timers.append((int(round(t_s * 1e9)), fn))
        self._timers.sort(key=lambda item: item[0])

    def wait(self, event, timeout) -> bool:
        self.waits.append(timeout)
        if event.is_set():
            return True
        self._advance(int(round(timeout * 1e9)))
        return event.is_set()

    def _advance(self, ns: int) -> None:
        target = self.now_ns + ns
        while self._timers and self._timers[0][0] <= target:
            t, fn = self._timers.pop(0)
            self.now_ns = max(self.now_ns, t)
            fn()
        self.now_ns = target
