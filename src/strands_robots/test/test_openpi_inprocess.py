"""The station's rollout drives a real openpi server through OpenPIPolicy: every applied action is the server's.

The rollout runs in process on the simulated arms with both cameras (``scene``, ``wrist``; the ``pattern``
adapter, no rendering); the openpi server (openpi-server 0.1.0, its own venv) is its own process, ended by PID.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("msgpack", reason="the bridge's optional dependency msgpack is not installed")

from openpi_harness import server_log, start_openpi_server, stop_server  # noqa: E402
from test_relay_harness import free_port  # noqa: E402

from strands_robots.cameras.config import load_camera_set  # noqa: E402
from strands_robots.client.obs_map import GRIPPER_RANGE  # noqa: E402
from strands_robots.client.openpi import OpenPIPolicy  # noqa: E402
from strands_robots.simulation import Simulation  # noqa: E402

HORIZON = 4
SCALE = 0.01  # small steps: the arm follows without nearing a safety limit


@pytest.fixture(scope="module")
def venv_python():
    from openpi_harness import openpi_venv

    try:
        return openpi_venv()
    except RuntimeError as exc:
        pytest.fail(str(exc))


def test_every_applied_action_is_the_servers_row_chunk_by_chunk_in_order(tmp_path, venv_python):
    port = free_port()
    server = start_openpi_server(tmp_path, port, horizon=HORIZON, scale=SCALE)
    policy = OpenPIPolicy(f"ws://127.0.0.1:{port}", obs_map="droid")
    try:
        sim = Simulation.with_robot("alice", cameras=load_camera_set().with_adapter("pattern"))
        applied = []
        out = sim.run_policy("alice", policy, instruction="pick up the red cube", n_steps=12,
                             control_frequency=50.0, action_horizon=HORIZON, fast_mode=True, seed=1,
                             observer=lambda e: applied.append(dict(e.action))
                             if type(e).__name__ == "RunPolicyStep" else None)
        assert out["status"] == "success", out
        log = server_log(tmp_path, port)
        assert [e["call"] for e in log] == [1, 2, 3]  # 12 steps, 4 actions a chunk: three round trips
        assert len(applied) == 12
        for step, action in enumerate(applied):
            call, h = divmod(step, HORIZON)
            got = log[call]["obs"]
            offset = SCALE * (0.01 * (h + 1) + 0.1 * call)
            joints = got["observation/joint_position"]["values"]
            want = {f"right.joint_{i}": float(np.float32(joints[i - 1] + offset)) for i in range(1, 7)}
            grip = got["observation/gripper_position"]["values"][0]
            want["right.gripper"] = GRIPPER_RANGE - float(np.float32(grip + offset)) * GRIPPER_RANGE  # 1 closed -> 0
            assert action.keys() == want.keys(), step
            for key in want:
                assert action[key] == pytest.approx(want[key], abs=1e-12), (step, key)
        first = log[0]["obs"]
        assert first["prompt"] == "pick up the red cube"
        assert first["observation/exterior_image_1_left"]["shape"] == [224, 224, 3]
        assert first["observation/wrist_image_left"]["shape"] == [224, 224, 3]
        assert first["observation/joint_position"]["values"][6] == 0.0
    finally:
        policy.close()
        stop_server(server)


def test_a_server_that_answers_twice_ends_the_episode_with_the_error_naming_it(tmp_path, venv_python):
    port = free_port()
    server = start_openpi_server(tmp_path, port, horizon=HORIZON, scale=SCALE, misbehave="answer_twice")
    policy = OpenPIPolicy(f"ws://127.0.0.1:{port}", obs_map="droid")
    try:
        sim = Simulation.with_robot("alice", cameras=load_camera_set().with_adapter("pattern"))
        out = sim.run_policy("alice", policy, instruction="pick up the red cube", n_steps=12,
                             control_frequency=50.0, action_horizon=HORIZON, fast_mode=True, seed=1)
        assert out["status"] == "error", out
        (ended,) = out["episodes"]
        assert ended["outcome"] == "error" and ended["error_type"] == "OpenPIError"
        assert "nobody asked for" in ended["error_message"] and "lock step" in ended["error_message"]
        assert ended["end_detail"].startswith("OpenPIError: openpi server ws://127.0.0.1:")
        # At most the one chunk answered before the extra frame was seen: none paired with another observation.
        assert ended["applied_actions"] <= HORIZON
        assert [e["call"] for e in server_log(tmp_path, port) if "call" in e][-1] <= 2
    finally:
        policy.close()
        stop_server(server)
