"""QueuedEventPublisher: the rollout node's observer copies into a bounded queue and never blocks on a step.

No DDS: the publish function is a plain callable the test controls (a gate holds the publisher thread inside
``publish`` so the queue fills deterministically). The messages are the real generated ObserverEvent types.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")

from strands_robots.conversions.events import msg_to_event  # noqa: E402
from strands_robots.nodes.rollout.event_publisher import QueuedEventPublisher  # noqa: E402
from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep  # noqa: E402

RUN_ID = "c" * 32
KEYS = ("left.joint_1", "left.joint_2", "right.joint_1", "right.joint_2")


def started(seq: int = 0) -> RunPolicyStarted:
    return RunPolicyStarted(
        run_id=RUN_ID, event_seq=seq, monotonic_ns=1_000 + seq, utc_ns=1_760_000_000_000_000_000 + seq,
        robot_name="sim_arms", policy="mock", instruction="", control_frequency=50.0, action_horizon=8,
        total_steps=100, async_rtc=False, episode_index=0, n_episodes=1, actuator_keys=KEYS)


def step(seq: int, observation: "dict | None" = None, action: "dict | None" = None) -> RunPolicyStep:
    return RunPolicyStep(
        run_id=RUN_ID, event_seq=seq, monotonic_ns=1_000 + seq, utc_ns=1_760_000_000_000_000_000 + seq,
        applied_action_index=seq - 1, legacy_step_index=seq - 1, action_resolution="full",
        applied_action_keys=KEYS, unresolved_action_keys=(), unresolved_action_reasons=(), action_error="",
        observation_is_chunk_reused=False, observation_age_steps=0, legacy_hook_outcome="absent", chunk_index=0,
        elapsed_s=0.02 * seq, sim_time_s=0.02 * seq, deadline_missed=False,
        observation=observation if observation is not None else {f"{k}.pos": 0.1 * seq for k in KEYS},
        action=action if action is not None else {k: 0.1 * seq for k in KEYS})


def ended(seq: int) -> RunPolicyEnded:
    return RunPolicyEnded(
        run_id=RUN_ID, event_seq=seq, monotonic_ns=1_000 + seq, utc_ns=1_760_000_000_000_000_000 + seq,
        outcome="ok", stopped_reason="budget", end_detail="", applied_actions=seq - 1, legacy_steps_used=seq - 1,
        action_errors=(), full_count=seq - 1, partial_count=0, none_count=0, unknown_count=0, full_rate=1.0,
        partial_rate=0.0, none_rate=0.0, observer_failures=0, missed_deadlines=0, chunks_inferred=1,
        prefetch_hits=0, prefetch_blocks=0, inference_latency_p50_s=0.0, inference_latency_max_s=0.0,
        elapsed_s=1.0, paused_s=0.0, sim_time_s=1.0)


class GatedPublish:
    """``publish(msg)`` that records every message; while closed, it blocks inside the call."""

    def __init__(self, closed: bool = True) -> None:
        self.msgs: list = []
        self.gate = threading.Event()
        if not closed:
            self.gate.set()
        self.entered = threading.Event()  # a publish call is in progress (the thread holds one item)

    def __call__(self, msg) -> None:
        self.entered.set()
        assert self.gate.wait(30.0), "test gate never opened"
        self.msgs.append(msg)


@pytest.fixture
def make_publisher():
    made: list = []

    def make(publish, **kwargs) -> QueuedEventPublisher:
        pub = QueuedEventPublisher(publish, **kwargs)
        made.append((pub, publish))
        return pub

    try:
        yield make
    finally:
        for pub, publish in made:
            if isinstance(publish, GatedPublish):
                publish.gate.set()
            pub.close(5.0)


def test_full_queue_drops_step_events_and_counts_them(make_publisher):
    publish = GatedPublish()
    pub = make_publisher(publish, depth=4)
    pub(started(0))
    assert publish.entered.wait(10.0)  # the thread holds Started inside publish; the queue is empty
    for seq in range(1, 5):
        pub(step(seq))  # fills the queue (depth 4)
    for seq in range(5, 8):
        pub(step(seq))  # dropped at once, never waits
    assert pub.dropped == 3

    publish.gate.set()
    assert pub.flush(10.0)  # room again; nothing was published for 5..7
    pub(step(8))
    pub(ended(9))
    assert pub.flush(10.0)

    seqs = [m.event_seq for m in publish.msgs]
    assert seqs == [0, 1, 2, 3, 4, 8, 9]
    dropped_before = {m.event_seq: m.dropped_before for m in publish.msgs}
    # The count travels on the first message after the gap, so the gap and the count line up.
    assert dropped_before[8] == 3
    assert sum(dropped_before.values()) == 3
    assert pub.published == 7 and pub.dropped == 3 and pub.publish_errors == 0
    assert isinstance(msg_to_event(publish.msgs[-1]), RunPolicyEnded)


def test_lifecycle_events_never_wait_and_evict_a_step_event_when_the_queue_is_full(make_publisher):
    publish = GatedPublish()  # a stalled publisher: it blocks inside publish until the gate opens
    pub = make_publisher(publish, depth=2)
    pub(started(0))
    assert publish.entered.wait(10.0)  # the thread holds Started inside publish; the queue is empty
    pub(step(1))
    pub(step(2))  # the queue is full now
    pub(step(3))  # a step is dropped
    assert pub.dropped == 1

    # Ended at a full queue, with the publisher still blocked: it is queued at once (the call returns on this
    # thread while the gate is closed), evicting the newest queued step (2).
    pub(ended(4))
    assert pub.dropped == 2
    publish.gate.set()
    assert pub.flush(10.0)

    kinds = [m.kind for m in publish.msgs]
    assert kinds == ["started", "step", "ended"]
    assert [m.event_seq for m in publish.msgs] == [0, 1, 4]
    # The gap before Ended (steps 2 and 3) is counted on Ended itself.
    assert publish.msgs[-1].dropped_before == 2
    assert pub.published == 3 and pub.dropped == 2


def test_evicted_step_passes_its_drop_count_to_the_next_event(make_publisher):
    publish = GatedPublish()
    pub = make_publisher(publish, depth=3)
    pub(started(0))
    assert publish.entered.wait(10.0)
    pub(step(1))
    pub(step(2))
    pub(ended(3))  # fills the queue: [1, 2, Ended]
    pub(step(4))  # dropped (full); reported on the next event enqueued
    pub(started(5))  # a new lifecycle at a full queue evicts step 2, whose successor Ended reports it
    publish.gate.set()
    assert pub.flush(10.0)

    assert [m.event_seq for m in publish.msgs] == [0, 1, 3, 5]
    gaps = {m.event_seq: m.dropped_before for m in publish.msgs}
    assert gaps == {0: 0, 1: 0, 3: 1, 5: 1}
    assert pub.dropped == 2


def test_publisher_copies_borrowed_observation_during_the_call(make_publisher):
    publish = GatedPublish()
    pub = make_publisher(publish, depth=8)
    pub(started(0))
    assert publish.entered.wait(10.0)  # conversion of the step happens later, on the publisher thread
    observation = {"left.joint_1.pos": 0.5, "left.joint_1.vel": -0.25, "sim_time_s": 1.0}
    action = {"left.joint_1": 0.75}
    pub(step(1, observation=observation, action=action))
    # The loop reuses its objects once the call returned (borrowed, not copied).
    observation["left.joint_1.pos"] = 99.0
    observation["extra"] = 1.0
    action["left.joint_1"] = -99.0
    action.clear()
    publish.gate.set()
    assert pub.flush(10.0)

    msg = publish.msgs[1].step[0]
    assert dict(zip(msg.observation_keys, msg.observation_values)) == {
        "left.joint_1.pos": 0.5, "left.joint_1.vel": -0.25, "sim_time_s": 1.0}
    assert dict(zip(msg.action_keys, msg.action_values)) == {"left.joint_1": 0.75}


def test_publisher_keeps_lifecycle_events_as_they_are(make_publisher):
    publish = GatedPublish(closed=False)
    pub = make_publisher(publish, depth=8)
    events = [started(0), step(1), ended(2)]
    for e in events:
        pub(e)
    assert pub.flush(10.0)
    back = [msg_to_event(m) for m in publish.msgs]
    assert back[0] == events[0] and back[2] == events[2]
    assert dataclasses.replace(back[1], observation={}, action={}) == dataclasses.replace(
        events[1], observation={}, action={})


def test_observer_call_is_cheap(make_publisher, capsys):
    pub = make_publisher(lambda msg: None, depth=100_000)
    keys = [f"{arm}.joint_{j}" for arm in ("left", "right") for j in range(1, 8)]  # two 7-key arms
    observation = {f"{k}.{q}": 0.1 for k in keys for q in ("pos", "vel", "effort")}
    action = {k: 0.1 for k in keys}
    events = [step(seq, observation=observation, action=action) for seq in range(1, 5001)]
    t0 = time.perf_counter()
    for e in events:
        pub(e)
    per_call_us = (time.perf_counter() - t0) / len(events) * 1e6
    assert pub.flush(30.0)
    assert pub.published + pub.dropped == len(events)
    with capsys.disabled():
        print(f"\nQueuedEventPublisher.__call__: {per_call_us:.1f} us per step event "
              f"({len(observation)} observation values, {len(action)} action values)")
