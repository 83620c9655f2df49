"""Camera frames in process.

``run_policy`` hands every camera's latest frame to the policy as an HWC uint8 array under ``<camera>.image``,
the step events carry stamps and ages in steps (never pixels), and a frame older than its bound ends the
episode as an error before a policy sees it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from strands_robots.cameras.config import CameraConfig, CameraSet, load_camera_set
from strands_robots.cameras.pattern import PatternCameras
from strands_robots.simulation import Simulation


class LookingPolicy:
    """Holds still and keeps what it was shown of each camera (shape, dtype, age, a hash of its bytes)."""

    never_blocks = True

    def __init__(self) -> None:
        self.seen: list = []

    def reset(self, task):
        self.keys = task["action_keys"]

    def act(self, observation):
        self.seen.append({k: (v.shape, v.dtype, float(observation[k + "_age_s"]), hash(v.tobytes()))
                          for k, v in observation.items() if k.endswith(".image")})
        return [{"right.joint_1": 0.0}]

    def resume(self, observation):
        pass


def test_images_reach_the_policy_with_the_configured_shape_and_dtype_and_events_carry_no_pixels():
    cams = load_camera_set().with_adapter("pattern")
    sim = Simulation.with_robot("alice", cameras=cams)
    policy = LookingPolicy()
    steps = []
    out = sim.run_policy("alice", policy, n_steps=12, control_frequency=50.0, fast_mode=True, action_horizon=1,
                         seed=3, observer=lambda e: steps.append(e) if type(e).__name__ == "RunPolicyStep" else None)
    assert out["status"] == "success", out
    assert len(policy.seen) == 12
    for seen in policy.seen:
        assert set(seen) == {"scene.image", "wrist.image"}
        for shape, dtype, age, _ in seen.values():
            assert shape == (224, 224, 3) and dtype == np.uint8 and 0.0 <= age < 1 / 15 + 1e-9
    # 15 fps in a 50 Hz loop on robot time: a new frame every third or fourth step, the same one between.
    sums = [s["scene.image"][3] for s in policy.seen]
    assert 3 <= len(set(sums)) <= 5
    assert all(s.camera_names == ("scene", "wrist") for s in steps)
    ages = [s.camera_age_steps[0] for s in steps]
    assert max(ages) in (2, 3) and ages[0] == 0
    stamps = [s.camera_stamp_ns[0] for s in steps]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(set(sums))
    for s in steps:
        assert not any(isinstance(getattr(s, f.name), np.ndarray) for f in dataclasses.fields(s)
                       if f.name != "observation")
        assert "scene.image" not in s.observation_keys  # the message's numeric arrays hold no pixels


def test_the_scene_camera_sees_the_object_move_with_the_seed_in_process():
    cams = load_camera_set().select(["scene"])
    sim = Simulation.with_robot("alice", cameras=cams)
    seen = {}
    for seed in (1, 2, 1):
        policy = LookingPolicy()
        out = sim.run_policy("alice", policy, n_steps=1, fast_mode=True, action_horizon=1, seed=seed)
        assert out["status"] == "success", out
        seen.setdefault(seed, []).append(policy.seen[0]["scene.image"][3])
    assert seen[1][0] == seen[1][1] != seen[2][0]


class FailingPattern(PatternCameras):
    """A camera that delivers its first frame and then none (its renders fail: a camera unplugged)."""

    def render(self, name):
        if self._frame[name] >= 1:
            raise OSError("camera unplugged")
        return super().render(name)


def failing(config, model_path=None):
    """Camera adapter factory named by ``module:attr`` (the adapter API's third way)."""
    return FailingPattern(config)


def test_a_camera_frame_older_than_its_bound_ends_the_episode_before_the_policy_sees_it():
    cams = CameraSet(f"{__name__}:failing", (CameraConfig("wrist", "right/wrist", 32, 32, 15.0, max_age_s=0.2),))
    sim = Simulation.with_robot("alice", cameras=cams)
    policy = LookingPolicy()
    out = sim.run_policy("alice", policy, n_steps=50, control_frequency=50.0, fast_mode=True, action_horizon=1)
    ep = out["episodes"][0]
    assert ep["outcome"] == "error" and ep["error_type"] == "CameraStale", ep
    assert "camera wrist stale: its latest frame is 0.220 s old (limit 0.2 s)" in ep["error_message"]
    assert "camera unplugged" in ep["error_message"]
    # 0.2 s of frames at 50 Hz were fresh (steps 0..10); the stale one at 0.22 s never reached the policy.
    assert len(policy.seen) == 11 and max(s["wrist.image"][2] for s in policy.seen) <= 0.2 + 1e-9


def test_a_step_message_carries_each_cameras_stamp_and_age_and_no_pixels():
    pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
    from strands_robots.conversions.events import event_to_msg, msg_to_event

    cams = load_camera_set().with_adapter("pattern")
    sim = Simulation.with_robot("alice", cameras=cams)
    steps = []
    out = sim.run_policy("alice", LookingPolicy(), n_steps=5, fast_mode=True, action_horizon=1,
                         observer=lambda e: steps.append(e) if type(e).__name__ == "RunPolicyStep" else None)
    assert out["status"] == "success", out
    last = steps[-1]
    msg = event_to_msg(last)
    (payload,) = msg.step
    assert list(payload.camera_names) == ["scene", "wrist"]
    assert list(payload.camera_stamp_ns) == list(last.camera_stamp_ns)
    assert list(payload.camera_age_steps) == list(last.camera_age_steps)
    assert not any(k.endswith(".image") for k in payload.observation_keys)
    assert "scene.image_age_s" in payload.observation_keys
    back = msg_to_event(msg)
    assert back.camera_names == ("scene", "wrist") and back.camera_stamp_ns == last.camera_stamp_ns


def test_a_task_placing_the_object_off_the_table_is_refused_before_any_event():
    sim = Simulation.with_robot("alice", cameras=load_camera_set().with_adapter("pattern"))
    events = []
    out = sim.run_policy("alice", "mock", n_steps=3, fast_mode=True, task={"object_x": "5"}, observer=events.append)
    assert out["status"] == "error" and out["error_type"] == "SceneParameterError"
    assert out["error_message"].startswith("object_x='5' refused: allowed: a number in [0.25, 0.45] m")
    assert events == [] and out["episodes"] == []
