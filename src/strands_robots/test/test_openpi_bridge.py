"""The openpi bridge against the real openpi server (openpi-server 0.1.0 / openpi-client 0.1.2 in their own venv).

Each server is its own process on loopback, serving a deterministic policy (``openpi_harness.StepPolicy``:
``actions[h] = state + 0.01 * (h + 1) + 0.1 * (call - 1)``), and is ended by PID in ``finally``.
"""

from __future__ import annotations

import signal
import subprocess

import numpy as np
import pytest

pytest.importorskip("msgpack", reason="the bridge's optional dependency msgpack is not installed")
pytest.importorskip("websockets", reason="the bridge's optional dependency websockets is not installed")

from openpi_harness import HORIZON, openpi_venv, server_log, start_openpi_server, stop_server  # noqa: E402
from test_relay_harness import free_port  # noqa: E402

from strands_robots.arm.model import ARM_NAMES, JOINT_NAMES, actuator_key  # noqa: E402
from strands_robots.client.obs_map import GRIPPER_RANGE, ObsMapError, load_obs_map, resize_with_pad  # noqa: E402
from strands_robots.client.openpi import (  # noqa: E402
    OpenPIConnectionLost,
    OpenPIError,
    OpenPIPolicy,
    OpenPIServerError,
    pack,
    unpack,
)

ALL_KEYS = tuple(actuator_key(arm, joint) for arm in ARM_NAMES for joint in JOINT_NAMES)
INSTRUCTION = "put the red cube in the bin"


@pytest.fixture(scope="module")
def venv_python():
    try:
        return openpi_venv()
    except RuntimeError as exc:  # say why: pip could not install the team's packages here
        pytest.fail(str(exc))


def observation(seed: int, scene=(240, 320), wrist=(120, 160)):
    """Return a station observation: every joint's pos/vel/effort and both cameras (HWC uint8)."""
    rng = np.random.default_rng(seed)
    obs = {}
    for key in ALL_KEYS:
        obs[f"{key}.pos"] = float(rng.uniform(0.0, 0.8) if key.endswith("gripper") else rng.uniform(-1, 1))
        obs[f"{key}.vel"] = 0.0
        obs[f"{key}.effort"] = 0.0
    obs["scene.image"] = rng.integers(0, 256, size=(*scene, 3), dtype=np.uint8)
    obs["wrist.image"] = rng.integers(0, 256, size=(*wrist, 3), dtype=np.uint8)
    obs["sim_time_s"] = 0.02 * seed
    return obs


def task(horizon=0):
    return {"instruction": INSTRUCTION, "action_keys": ALL_KEYS, "action_horizon": horizon}


def droid_expected(obs, call, horizon=HORIZON):
    """Return what StepPolicy answers for ``obs`` on ``call``, mapped back by the droid preset."""
    out = []
    for h in range(horizon):
        step = np.float32(0.01 * (h + 1) + 0.1 * (call - 1))
        row = {f"right.joint_{i}": float(np.float32(np.float32(obs[f"right.joint_{i}.pos"]) + step))
               for i in range(1, 7)}
        # openpi's gripper is 1 closed, this jaw's opening 0: server = 1 - obs / 0.8, station = 0.8 - 0.8 * server
        gripper = np.float32(float(obs["right.gripper.pos"]) * (-1 / GRIPPER_RANGE) + 1.0)
        row["right.gripper"] = float(np.float32(gripper + step)) * -GRIPPER_RANGE + GRIPPER_RANGE
        out.append(row)
    return out


def assert_chunk(chunk, expected):
    assert len(chunk) == len(expected)
    for got, want in zip(chunk, expected):
        assert set(got) == set(want)
        for key in want:
            assert got[key] == pytest.approx(want[key], abs=1e-6), key


@pytest.fixture
def server(tmp_path, venv_python):
    """Start servers with ``start(**kwargs)``; every one is ended by PID afterwards."""
    procs = []

    def start(port=None, **kwargs):
        port = port or free_port()
        proc = start_openpi_server(tmp_path, port, **kwargs)
        procs.append(proc)
        return proc, port, f"ws://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for proc in procs:
            stop_server(proc)


def test_the_bridge_applies_exactly_the_servers_actions_chunk_by_chunk_in_order(server, tmp_path):
    _, port, url = server(metadata={"reset_pose": [0.0, 0.5]})
    policy = OpenPIPolicy(url, obs_map="droid")
    try:
        assert policy.metadata == {"reset_pose": [0.0, 0.5]} and policy.variant == "openpi"
        policy.reset(task())
        sent = [observation(seed) for seed in range(3)]
        chunks = [policy.act(obs) for obs in sent]
        for call, (obs, chunk) in enumerate(zip(sent, chunks), start=1):
            assert_chunk(chunk, droid_expected(obs, call))
        assert policy.last_timing["policy_timing"]["infer_ms"] == 0.5
        assert set(policy.last_timing["server_timing"]) == {"infer_ms", "prev_total_ms"}
        # What the server received, key by key: the right arm's joints (7th is 0), the gripper in [0, 1] (1 closed),
        # both cameras resized with padding to 224x224 uint8, the instruction as prompt.
        log = server_log(tmp_path, port)
        assert [entry["call"] for entry in log] == [1, 2, 3]
        for obs, entry in zip(sent, log):
            got = entry["obs"]
            assert set(got) == {"observation/joint_position", "observation/gripper_position",
                                "observation/exterior_image_1_left", "observation/wrist_image_left", "prompt"}
            assert got["prompt"] == INSTRUCTION
            joints = [np.float32(obs[f"right.joint_{i}.pos"]) for i in range(1, 7)] + [0.0]
            assert got["observation/joint_position"]["values"] == pytest.approx(joints, abs=1e-7)
            assert got["observation/joint_position"]["dtype"] == "<f4"
            assert got["observation/gripper_position"]["values"] == pytest.approx(
                [1.0 - obs["right.gripper.pos"] / GRIPPER_RANGE], abs=1e-6)  # openpi 1 = closed, ours 0
            for server_key, camera in (("observation/exterior_image_1_left", "scene"),
                                       ("observation/wrist_image_left", "wrist")):
                assert got[server_key]["shape"] == [224, 224, 3] and got[server_key]["dtype"] == "|u1"
                assert got[server_key]["sum"] == float(resize_with_pad(obs[f"{camera}.image"], 224, 224).sum())
        # The episode's action horizon bounds the chunk: its first rows, in order.
        policy.reset(task(horizon=2))
        obs = observation(7)
        assert_chunk(policy.act(obs), droid_expected(obs, 4)[:2])
        assert policy.connections == 1
    finally:
        policy.close()


def test_a_server_that_raises_ends_the_episode_with_its_message_and_the_next_episode_reconnects(server, tmp_path):
    _, port, url = server(raise_on=2)
    policy = OpenPIPolicy(url, obs_map="droid")
    try:
        policy.reset(task())
        policy.act(observation(0))
        with pytest.raises(OpenPIServerError, match=r"^ValueError: policy exploded at call 2 \(openpi server "
                                                    rf"{url}, during infer\)$") as info:
            policy.act(observation(1))
        assert "Traceback (most recent call last)" in info.value.traceback
        # The server closed that connection (1011); the next episode connects again and gets actions.
        policy.reset(task())
        obs = observation(2)
        assert_chunk(policy.act(obs), droid_expected(obs, 3))
        assert policy.connections == 2
        assert [entry["call"] for entry in server_log(tmp_path, port)] == [1, 2, 3]
    finally:
        policy.close()


def test_a_server_killed_mid_job_ends_that_episode_and_the_bridge_reconnects_for_the_next(server, tmp_path):
    proc, port, url = server()
    policy = OpenPIPolicy(url, obs_map="droid", connect_timeout_s=30.0)
    try:
        policy.reset(task())
        obs = observation(0)
        assert_chunk(policy.act(obs), droid_expected(obs, 1))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with pytest.raises(OpenPIConnectionLost, match=rf"openpi server {url} closed the connection during infer"):
            policy.act(observation(1))
        with pytest.raises(OpenPIConnectionLost, match="not connected .*the next episode's reset reconnects"):
            policy.act(observation(1))  # the rest of that episode: no silent reconnect mid-episode
        # A supervisor restarts the server on the same port; the next episode's reset connects to it.
        restarted, _, _ = server(port=port)
        assert restarted.pid != proc.pid
        policy.reset(task())
        obs = observation(2)
        assert_chunk(policy.act(obs), droid_expected(obs, 1))  # a new server process: its first call
        assert policy.connections == 2
        assert {entry["pid"] for entry in server_log(tmp_path, port)} == {proc.pid, restarted.pid}
    finally:
        policy.close()


def test_a_server_that_is_down_at_reset_ends_that_episode_with_a_clear_error(server):
    proc, port, url = server()
    policy = OpenPIPolicy(url, obs_map="droid", connect_timeout_s=0.5)
    try:
        stop_server(proc, signal.SIGKILL)
        with pytest.raises(OpenPIConnectionLost, match=rf"openpi server {url} cannot be reached within 0.5 s"):
            policy.reset(task())
    finally:
        policy.close()


def test_a_server_that_answers_twice_is_refused_naming_the_frame_nobody_asked_for(server, tmp_path):
    _, port, url = server(misbehave="answer_twice")
    policy = OpenPIPolicy(url, obs_map="droid")
    try:
        policy.reset(task())
        returned = []
        with pytest.raises(OpenPIError, match=rf"openpi server {url} sent a binary frame of \d+ bytes nobody asked "
                                              r"for, (behind its answer to|before the) infer.*broke openpi's lock "
                                              r"step") as info:
            for seed in range(3):
                obs = observation(seed)
                returned.append((obs, policy.act(obs)))
        # Caught at the next exchange at the latest (the extra frame was on the socket before it), and every chunk
        # handed out before was the answer to its own observation: nothing was paired with the wrong one.
        assert len(returned) <= 1, info.value
        for call, (obs, chunk) in enumerate(returned, start=1):
            assert_chunk(chunk, droid_expected(obs, call))
        log = server_log(tmp_path, port)
        assert [e["call"] for e in log if "call" in e] == list(range(1, len(returned) + 2))
        assert [e["sent_twice"] for e in log if "sent_twice" in e][:1] == [1]
        with pytest.raises(OpenPIConnectionLost, match="not connected"):  # closed: the rest of the episode too
            policy.act(observation(9))
    finally:
        policy.close()


def test_a_redirect_is_refused_naming_both_addresses_and_no_observation_is_sent(server, tmp_path):
    _, target_port, target = server()
    _, _, url = server(misbehave="redirect", redirect_to=f"{target}/")
    with pytest.raises(OpenPIError, match=rf"^openpi server {url} redirected to {target}/: redirects are refused "
                                          r"\(the job records the address you named"):
        OpenPIPolicy(url, obs_map="droid")
    policy = OpenPIPolicy(url, obs_map="droid", connect=False)
    try:
        with pytest.raises(OpenPIError, match="redirects are refused"):
            policy.reset(task())
        assert policy.connections == 0 and policy.metadata == {}
    finally:
        policy.close()
    assert server_log(tmp_path, target_port) == []  # the server it pointed to never got an observation


@pytest.mark.parametrize("misbehave, error, message", [
    ("complex_actions", OpenPIError, r"answered infer with a frame that does not decode \(ValueError: the openpi "
                                     r"server sent an array of dtype complex128"),
    ("string_actions", ObsMapError, r"obs map 'droid': the server's actions are strings \(dtype <U\d+\); actions "
                                    r"must be real numbers"),
])
def test_complex_or_string_actions_are_refused_naming_the_dtype_never_coerced(server, misbehave, error, message):
    _, _, url = server(misbehave=misbehave)
    policy = OpenPIPolicy(url, obs_map="droid")
    try:
        policy.reset(task())
        with pytest.raises(error, match=message):
            policy.act(observation(0))
    finally:
        policy.close()


@pytest.mark.parametrize("actions, what", [
    (np.array([[0.1 + 1j] * 8]), r"complex numbers \(dtype <c16\)"),
    (np.array([["0.5"] * 8]), r"strings \(dtype <U3\)"),
    (np.array([[b"0.5"] * 8]), r"byte strings \(dtype \|S3\)"),
    (np.ones((1, 8), dtype=bool), r"booleans \(dtype \|b1\)"),
    ([[0.1] * 7 + ["0.2"]], r"strings \(dtype <U32\)"),
    ([[0.1] * 7 + [{"x": 1}]], r"objects \(dtype \|O\)"),
])
def test_an_answer_whose_actions_are_not_real_numbers_is_refused_naming_its_dtype(actions, what):
    with pytest.raises(ObsMapError, match=rf"the server's actions are {what}; actions must be real numbers"):
        load_obs_map("droid").chunk(actions)
    ints = load_obs_map("droid").chunk(np.arange(8, dtype=np.int16)[None, :])  # integers are numbers
    assert ints[0]["right.joint_2"] == 1.0


def test_roboarena_reset_and_infer_with_the_mapping_its_metadata_names(server, tmp_path):
    metadata = {"image_resolution": [128, 96], "needs_wrist_camera": False, "n_external_cameras": 1,
                "action_space": "joint_position", "needs_session_id": True}
    _, port, url = server(mode="roboarena", metadata=metadata)
    policy = OpenPIPolicy(url)  # the variant and the mapping come from the metadata
    try:
        assert policy.variant == "roboarena" and policy.metadata == metadata
        for episode in range(2):
            policy.reset(task())
            obs = observation(10 + episode)
            # Each episode's reset restarts the server's count: every episode's first chunk is call 1.
            assert_chunk(policy.act(obs), droid_expected(obs, 1))
        log = server_log(tmp_path, port)
        assert [("reset" if "reset" in e else e["call"]) for e in log] == ["reset", 1, "reset", 1]
        sessions = [e["session_id"] for e in log if "reset" in e]
        assert len(set(sessions)) == 2 and all(sessions)
        infer = log[1]["obs"]
        assert "endpoint" not in infer  # the server popped it: every request carried it
        assert set(infer) == {"observation/joint_position", "observation/gripper_position",
                              "observation/exterior_image_0_left", "prompt", "session_id"}
        assert infer["observation/exterior_image_0_left"]["shape"] == [128, 96, 3]
        assert infer["session_id"] == sessions[0]
    finally:
        policy.close()


def test_roboarena_without_needs_session_id_gets_only_the_endpoint_and_its_keys(server, tmp_path):
    metadata = {"image_resolution": [224, 224], "needs_wrist_camera": True, "n_external_cameras": 1,
                "action_space": "joint_position"}
    _, port, url = server(mode="roboarena", metadata=metadata)
    policy = OpenPIPolicy(url, obs_map="roboarena")
    try:
        policy.reset(task())
        obs = observation(4)
        assert_chunk(policy.act(obs), droid_expected(obs, 1))
        reset, infer = server_log(tmp_path, port)
        assert reset == {"reset": True, "session_id": None}
        assert set(infer["obs"]) == {"observation/joint_position", "observation/gripper_position",
                                     "observation/exterior_image_0_left", "observation/wrist_image_left", "prompt"}
    finally:
        policy.close()


def test_roboarena_metadata_the_station_cannot_meet_is_refused_naming_it(server):
    _, _, url = server(mode="roboarena", metadata={"image_resolution": [224, 224], "n_external_cameras": 2,
                                                   "needs_wrist_camera": True, "action_space": "joint_position"})
    with pytest.raises(ObsMapError, match="needs 2 external cameras; this station has 1"):
        OpenPIPolicy(url)
    _, _, url = server(mode="roboarena", metadata={"image_resolution": [224, 224], "n_external_cameras": 1,
                                                   "needs_wrist_camera": True, "action_space": "joint_velocity"})
    with pytest.raises(ObsMapError, match="action_space is 'joint_velocity'; this bridge serves joint_position"):
        OpenPIPolicy(url)


def test_aloha_preset_nests_chw_images_and_maps_both_arms_in_order(server, tmp_path):
    _, port, url = server(mode="aloha")
    policy = OpenPIPolicy(url, obs_map="aloha")
    try:
        policy.reset(task())
        obs = observation(3)
        chunk = policy.act(obs)
        # left 6 + gripper, right 6 + gripper; the grippers go as openpi's [0, 1] (1 closed) and come back on the
        # 0.8 jaw opening (0 closed)
        grip = {k: k.endswith(".gripper") for k in ALL_KEYS}
        state = [np.float32(1.0 - obs[f"{k}.pos"] / GRIPPER_RANGE if grip[k] else obs[f"{k}.pos"]) for k in ALL_KEYS]
        for h, row in enumerate(chunk):
            assert list(row) == list(ALL_KEYS)
            step = np.float32(0.01 * (h + 1))
            assert [row[k] for k in ALL_KEYS] == pytest.approx(
                [GRIPPER_RANGE - GRIPPER_RANGE * float(np.float32(s + step)) if grip[k] else float(np.float32(s + step))
                 for s, k in zip(state, ALL_KEYS)], abs=1e-6)
        got = server_log(tmp_path, port)[0]["obs"]
        assert got["images.cam_high"]["shape"] == [3, 224, 224]
        assert got["images.cam_right_wrist"]["shape"] == [3, 224, 224]
        assert got["state"]["shape"] == [14]
    finally:
        policy.close()


def test_resize_with_pad_matches_openpi_client_and_pads_with_black(venv_python, tmp_path):
    rng = np.random.default_rng(5)
    wide = np.full((100, 200, 3), 200, dtype=np.uint8)
    out = resize_with_pad(wide, 224, 224)
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    assert not out[:56].any() and not out[168:].any() and (out[56:168] == 200).all()
    tall = rng.integers(0, 256, size=(300, 90, 3), dtype=np.uint8)
    same = resize_with_pad(tall, 300, 90)
    assert same is tall
    # Pixel for pixel what openpi-client's image_tools.resize_with_pad gives, for both shapes.
    images = {"wide": wide, "tall": tall, "odd": rng.integers(0, 256, size=(241, 319, 3), dtype=np.uint8)}
    for name, image in images.items():
        np.save(tmp_path / f"{name}.npy", image)
    script = ("import sys, numpy as np\nfrom openpi_client import image_tools\n"
              "for name in sys.argv[2:]:\n"
              "    img = np.load(f'{sys.argv[1]}/{name}.npy')\n"
              "    np.save(f'{sys.argv[1]}/{name}.out.npy', image_tools.resize_with_pad(img, 224, 224))\n")
    subprocess.run([str(venv_python), "-c", script, str(tmp_path), *images], check=True, timeout=60)
    for name, image in images.items():
        theirs = np.load(tmp_path / f"{name}.out.npy")
        assert np.array_equal(resize_with_pad(image, 224, 224), theirs), name


def test_the_codec_round_trips_with_openpi_clients_msgpack_numpy(venv_python, tmp_path):
    ours = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.int64(7), "prompt": "pick",
            "nested": {"img": np.zeros((2, 2, 3), dtype=np.uint8)}}
    (tmp_path / "ours.bin").write_bytes(pack(ours))
    script = ("import sys, numpy as np\nfrom openpi_client import msgpack_numpy as m\n"
              "d = m.unpackb(open(sys.argv[1] + '/ours.bin', 'rb').read())\n"
              "assert d['a'].dtype == np.float32 and d['a'].shape == (2, 3) and d['a'][1, 2] == 5.0\n"
              "assert d['b'] == 7 and d['b'].dtype == np.int64 and d['prompt'] == 'pick'\n"
              "assert d['nested']['img'].shape == (2, 2, 3)\n"
              "open(sys.argv[1] + '/theirs.bin', 'wb').write(m.packb({'actions': d['a'] * 2, 's': np.float32(1.5)}))\n")
    subprocess.run([str(venv_python), "-c", script, str(tmp_path)], check=True, timeout=60)
    theirs = unpack((tmp_path / "theirs.bin").read_bytes())
    assert theirs["actions"].dtype == np.float32 and theirs["actions"].tolist() == [[0, 2, 4], [6, 8, 10]]
    assert theirs["s"] == 1.5 and isinstance(theirs["s"], np.float32)


def test_pack_sends_each_arrays_bytes_as_openpi_clients_tobytes_form_does_for_every_layout():
    import msgpack

    def reference(obj):  # openpi_client.msgpack_numpy.pack_array's form: a copy made by tobytes()
        if isinstance(obj, np.ndarray):
            return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}

    image = np.arange(224 * 224 * 3, dtype=np.uint32).astype(np.uint8).reshape(224, 224, 3)
    arrays = {"c": image, "fortran": np.asfortranarray(image), "strided": image[::2, ::-3],
              "chw": image.transpose(2, 0, 1),
              "0d": np.array(2.5), "empty": np.zeros((0, 3), np.float32), "big_endian": np.arange(6, dtype=">i4"),
              "bool": np.array([True, False, True]), "half": np.linspace(0, 1, 5, dtype=np.float16)}
    for name, array in arrays.items():
        frame = pack({"x": array})
        assert frame == msgpack.packb({"x": array}, default=reference, use_bin_type=True), name
        back = unpack(frame)["x"]
        assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array), name
    assert unpack(pack({"s": np.float32(1.5)}))["s"] == np.float32(1.5)
    with pytest.raises(TypeError, match="dtype <U"):
        pack({"t": np.array(["text"])})


YAML_MAP = """
prompt: instruction
state:
  robot/state: [left.joint_1.pos, {key: left.gripper.pos, scale: 2.0, offset: -0.5}, 1.5]
images:
  cams.top: {camera: scene, size: [64, 32], layout: chw}
  cams.hand: {camera: wrist.image}
actions:
  - left.joint_1
  - null
  - {key: left.gripper, scale: 0.5, offset: 0.1}
extra:
  robot_id: station-7
"""


def test_a_yaml_mapping_file_maps_keys_scales_images_and_action_columns(tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text(YAML_MAP)
    mapping = load_obs_map(str(path))
    assert mapping.action_keys == ("left.joint_1", "left.gripper") and mapping.cameras == ("scene", "wrist")
    obs = observation(1)
    request = mapping.request(obs, "stack the cubes")
    assert request["instruction"] == "stack the cubes" and request["robot_id"] == "station-7"
    assert request["robot/state"].tolist() == pytest.approx(
        [obs["left.joint_1.pos"], obs["left.gripper.pos"] * 2.0 - 0.5, 1.5], abs=1e-6)
    assert request["cams"]["top"].shape == (3, 64, 32)
    assert np.array_equal(request["cams"]["top"], resize_with_pad(obs["scene.image"], 64, 32).transpose(2, 0, 1))
    assert request["cams"]["hand"] is not None and np.array_equal(request["cams"]["hand"], obs["wrist.image"])
    chunk = mapping.chunk(np.array([[0.25, 99.0, 0.5], [0.5, 99.0, 1.0]], dtype=np.float32))
    assert chunk == [{"left.joint_1": 0.25, "left.gripper": pytest.approx(0.35)},
                     {"left.joint_1": 0.5, "left.gripper": pytest.approx(0.6)}]
    with pytest.raises(ObsMapError, match=r"actions have 2 columns; the mapping names 3 \(left.joint_1, -, "
                                          r"left.gripper\)"):
        mapping.chunk(np.zeros((4, 2)))
    with pytest.raises(ObsMapError, match=r"robot/state\[0\] needs the observation key 'left.joint_1.pos'"):
        mapping.request({"scene.image": obs["scene.image"]}, "x")
    with pytest.raises(ObsMapError, match=r"cams.hand needs the camera image 'wrist.image'"):
        mapping.request({k: v for k, v in obs.items() if k != "wrist.image"}, "x")


@pytest.mark.parametrize("text, message", [
    ("actions: []\n", "actions must be a non-empty list"),
    ("actions: [a.b]\nstate: {s: []}\n", r"state.s must be a non-empty list"),
    ("actions: [a.b, a.b]\n", r"actions command \['a.b'\] more than once"),
    ("actions: [a.b]\nimages: {i: {camera: scene, size: [0, 5]}}\n", r"images.i.size must be \[height, width\]"),
    ("actions: [a.b]\nimages: {i: {camera: scene, layout: whc}}\n", "layout must be hwc or chw"),
    ("actions: [a.b]\nfps: 5\n", r"unknown keys \['fps'\]"),
    ("actions: [{key: a.b, gain: 2}]\n", r"actions\[0\] has unknown keys \['gain'\]"),
    ("- not a mapping\n", "the top level must be a mapping"),
    ("actions: [a.b\n", "not YAML"),
])
def test_a_bad_mapping_file_is_refused_in_one_line_naming_the_entry(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ObsMapError, match=message) as info:
        OpenPIPolicy("ws://127.0.0.1:1", obs_map=str(path), connect=False)
    assert "\n" not in str(info.value)


def test_an_unknown_preset_or_address_is_refused_before_connecting():
    with pytest.raises(ObsMapError, match="neither a preset .*droid_jointpos, droid, aloha, libero, roboarena"):
        OpenPIPolicy("ws://127.0.0.1:1", obs_map="bridge", connect=False)
    with pytest.raises(ObsMapError, match=r"no obs map named: name the preset that fits your server \(droid_jointpos, "
                                          r"droid, aloha, libero, roboarena\) or a YAML mapping file"):
        OpenPIPolicy("ws://127.0.0.1:1", variant="openpi", connect=False)
    with pytest.raises(ValueError, match="must be ws://HOST:PORT"):
        OpenPIPolicy("127.0.0.1:8000", connect=False)


def test_a_plain_openpi_server_served_with_no_mapping_is_refused_naming_the_presets(server):
    _, _, url = server()  # a DROID server whose metadata is not RoboArena's: no mapping is assumed
    with pytest.raises(ObsMapError, match=r"no obs map named: .*droid_jointpos is openpi's pi05_droid_jointpos, droid "
                                          r"its stock DROID checkpoints \(joint velocities"):
        OpenPIPolicy(url)


def test_an_episode_that_does_not_offer_the_mappings_keys_is_refused_at_reset(server):
    _, _, url = server()
    policy = OpenPIPolicy(url, obs_map="droid")
    try:
        with pytest.raises(ObsMapError, match=r"commands \['right.joint_1'.*which this episode does not offer"):
            policy.reset({"instruction": "x", "action_keys": ("left.joint_1",)})
    finally:
        policy.close()
