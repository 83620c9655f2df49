"""Camera frames through the relay: compressed on the station's side, decoded by the Evaluation Client.

The codec (``pb.EncodedImage`` <-> an HWC uint8 array), the task's camera request (which cameras, what size,
JPEG or PNG), and end to end: the station's rollout in process (real MuJoCo renders of ``scene`` and ``wrist``)
driving the ``relay`` provider through a real relay to a policy served by ``EvaluationClient.serve_policy``,
whose ``act`` gets each asked-for camera at the asked size as ``uint8``. A malformed camera request is refused
at submit (the relay), in a job file and by the provider, each naming the key and why.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay, yes_no_task  # noqa: E402

from strands_robots.cameras.request import (  # noqa: E402
    CameraRequest,
    CameraRequestError,
    ImageRequest,
    encode_observation,
    image_request,
    parse_cameras,
)
from strands_robots.client import EvaluationClient, InvalidTask, Policy  # noqa: E402
from strands_robots.client import codec  # noqa: E402
from strands_robots.client.images import EncodedImage, ImageCodecError, decode_image, encode_image  # noqa: E402
from strands_robots.policies import relay as relay_policy  # noqa: E402
from strands_robots.wire.credentials import RelayCredentials  # noqa: E402
from strands_robots.station.job import JobSpecError  # noqa: E402
from strands_robots.station.job_file import job_spec_from_mapping, task_to_mapping  # noqa: E402


def gradient(h=48, w=64):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 255 // (w - 1), yy * 255 // (h - 1), (xx + yy) % 256], axis=-1).astype(np.uint8)


# -- the codec ---------------------------------------------------------------------------------------------------
def test_png_round_trips_exactly_and_jpeg_closely_as_hwc_uint8():
    image = gradient()
    for fmt, tolerance in (("png", 0), ("jpeg", 12)):
        msg = codec.observation_to_pb({"scene.image": encode_image(image, fmt, 90), "right.joint_1.pos": 0.5})
        assert msg.values["scene.image"].WhichOneof("kind") == "image"
        out = codec.observation_from_pb(msg)
        assert out["right.joint_1.pos"] == 0.5
        got = out["scene.image"]
        assert got.shape == (48, 64, 3) and got.dtype == np.uint8
        assert int(np.abs(got.astype(int) - image.astype(int)).mean()) <= tolerance, fmt
    small = encode_image(image, "jpeg", 90, size=(32, 16))
    assert (small.width, small.height) == (32, 16) and decode_image(small).shape == (16, 32, 3)
    assert len(encode_image(image, "jpeg", 10).data) < len(encode_image(image, "jpeg", 95).data)


def test_a_frame_whose_bytes_are_not_the_declared_image_is_refused_naming_the_key():
    good = encode_image(gradient(), "jpeg", 90)
    cases = [(EncodedImage("jpeg", good.data, 63, 48), "decoded to 64x48, declared 63x48"),
             (EncodedImage("png", good.data, 64, 48), "declared png but the bytes are JPEG"),
             (EncodedImage("jpeg", b"not an image", 64, 48), "12 bytes are not a readable jpeg image"),
             (EncodedImage("gif", good.data, 64, 48), "image format 'gif' is not one of jpeg, png")]
    for encoded, reason in cases:
        msg = codec.observation_to_pb({"wrist.image": encoded})
        with pytest.raises(codec.CodecError, match=r"observation\['wrist.image'\]") as info:
            codec.observation_from_pb(msg)
        assert reason in str(info.value)
    with pytest.raises(ImageCodecError, match="JPEG quality 0 refused"):
        encode_image(gradient(), "jpeg", 0)
    with pytest.raises(ImageCodecError, match=r"\(height, width, 3\) uint8"):
        encode_image(gradient().astype(np.float32), "png")


# -- the task's camera request -----------------------------------------------------------------------------------
def test_the_camera_request_is_read_from_the_tasks_parameters():
    assert image_request({}) == ImageRequest(None, "jpeg", 90)
    req = image_request({"cameras": "scene:96x64, wrist", "image_format": "png", "image_quality": "50"})
    assert req == ImageRequest((CameraRequest("scene", (96, 64)), CameraRequest("wrist", None)), "png", 50)
    assert parse_cameras("none") == ()
    for text, reason in (("scene:0x10", "8..4096"), ("scene,scene", "named twice"), ("scene:224", "expected"),
                         ("", "names no camera"), ("9cam", "not a camera name")):
        with pytest.raises(CameraRequestError, match=reason):
            parse_cameras(text)


def test_encode_observation_selects_resizes_and_leaves_the_others_out():
    obs = {"scene.image": gradient(), "scene.image_age_s": 0.01, "scene.image_stamp_ns": 5,
           "wrist.image": gradient(32, 32), "wrist.image_age_s": 0.02, "wrist.image_stamp_ns": 6,
           "right.joint_1.pos": 0.1}
    out = encode_observation(obs, image_request({"cameras": "scene:24x16"}))
    assert set(out) == {"scene.image", "scene.image_age_s", "scene.image_stamp_ns", "right.joint_1.pos"}
    assert (out["scene.image"].width, out["scene.image"].height, out["scene.image"].format) == (24, 16, "jpeg")
    everything = encode_observation(obs, image_request({}))
    assert (everything["wrist.image"].width, everything["wrist.image"].height) == (32, 32)
    assert set(encode_observation(obs, image_request({"cameras": "none"}))) == {"right.joint_1.pos"}
    with pytest.raises(CameraRequestError, match="asks for camera\\(s\\) top; this station's observations hold "
                                                 "scene, wrist"):
        encode_observation(obs, image_request({"cameras": "top,scene"}))


# -- refusals where a job enters ---------------------------------------------------------------------------------
def test_a_malformed_camera_request_is_refused_by_the_job_file_the_relay_and_the_provider(tmp_path):
    job = {"job_id": "j", "client_id": "c", "station_id": "sim_station", "episodes_total": 1,
           "policy": {"provider": "mock"}, "tasks": [dict(yes_no_task(), scoring=[
               {"name": "placed", "question": "?", "answer_type": "yes_no", "max_points": 1,
                "success_answer": "yes"}], parameters={"cameras": "scene:224x0"})]}
    with pytest.raises(JobSpecError, match=r"tasks\[0\]\.parameters\['cameras'\]: cameras='scene:224x0' refused: "
                                           r"entry 'scene:224x0': width and height must be in 8..4096"):
        job_spec_from_mapping(job)
    job["tasks"][0]["parameters"] = {}
    job["images"] = {"cameras": "scene:224x224", "format": "tiff"}
    with pytest.raises(JobSpecError, match=r"image_format='tiff' refused"):
        job_spec_from_mapping(job)
    job["images"] = {"camera": "scene"}
    with pytest.raises(JobSpecError, match=r"images.*unknown keys \['camera'\]"):
        job_spec_from_mapping(job)
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        bad = dict(yes_no_task(), parameters={"cameras": "scene:224x224,scene"})
        with pytest.raises(InvalidTask, match=r"tasks\[0\]\.parameters\['cameras'\].*camera 'scene' is named twice"):
            client.submit_job(station_id="sim_station", tasks=[bad], episodes=1)
        client.close()
    factory = relay_policy.relay_policy_factory(RelayCredentials(targets=("127.0.0.1:1",), station_id="sim_station",
                                                                 token=STATION_TOKENS["sim_station"]))
    with pytest.raises(ValueError, match="camera request is refused: image_quality=200"):
        factory({"job_id": "j", "episode_id": "ep_0000", "task": {"parameters": {"image_quality": "200"}}})


def test_a_job_files_images_field_sets_every_tasks_camera_parameters_unless_a_task_does():
    sheet = [{"name": "placed", "question": "?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
    job = {"job_id": "j", "client_id": "c", "station_id": "s", "episodes_total": 2, "policy": {"provider": "mock"},
           "images": {"cameras": "scene:224x224,wrist:224x224", "format": "jpeg", "quality": 80},
           "tasks": [{"task_id": "a", "instruction": "a", "scoring": sheet},
                     {"task_id": "b", "instruction": "b", "scoring": sheet, "parameters": {"cameras": "none"}}]}
    spec = job_spec_from_mapping(job)
    assert dict(spec.tasks[0].parameters) == {"cameras": "scene:224x224,wrist:224x224", "image_format": "jpeg",
                                              "image_quality": "80"}
    assert dict(spec.tasks[1].parameters) == {"cameras": "none", "image_format": "jpeg", "image_quality": "80"}


# -- end to end: the station's rollout, the real relay, a served policy -------------------------------------------
class ShapePolicy(Policy):
    """Holds still; keeps the shape and dtype of every image it is shown, and the keys."""

    def __init__(self):
        self.seen = []

    def reset(self, task):
        self.keys = tuple(self.episode.action_keys)

    def act(self, observation):
        self.seen.append({k: (v.shape, v.dtype.name, int(v.mean())) if k.endswith(".image") else type(v).__name__
                          for k, v in observation.items() if k.startswith(("scene.", "wrist."))})
        return [{"right.joint_1": float(observation["right.joint_1.pos"])}]

    def resume(self, observation):
        pass


def _serve(client, job_id, policy):
    out = {}

    def run():
        try:
            out["final"] = client.serve_policy(job_id, policy)
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return out


@pytest.mark.parametrize("parameters, expected", [
    ({"cameras": "scene:96x64,wrist", "image_quality": "70"}, {"scene": (64, 96, 3), "wrist": (224, 224, 3)}),
    ({"cameras": "wrist:112x112", "image_format": "png"}, {"wrist": (112, 112, 3)}),
    ({"cameras": "none"}, {}),
])
def test_images_reach_a_relay_served_policy_with_the_asked_shape_and_dtype(tmp_path, parameters, expected):
    from strands_robots.cameras.config import load_camera_set
    from strands_robots.wire.pb_model import task_from_pb
    from strands_robots.client.evaluation_client import task_from_dict
    from strands_robots.simulation import Simulation

    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        sent = dict(yes_no_task(), parameters=parameters)
        job_id = client.submit_job(station_id="sim_station", tasks=[sent], episodes=1)
        remote = ShapePolicy()
        served = _serve(client, job_id, remote)
        creds = RelayCredentials(targets=(relay.target,), station_id="sim_station", token=STATION_TOKENS["sim_station"])
        station_task = task_to_mapping(task_from_pb(task_from_dict(sent)))
        policy = relay_policy.relay_policy_factory(creds)({"job_id": job_id, "episode_id": "ep_0000",
                                                           "task": station_task, "attach_timeout_s": 20.0,
                                                           "reply_timeout_s": 20.0})
        sim = Simulation.with_robot("alice", cameras=load_camera_set())
        try:
            out = sim.run_policy("alice", policy, n_steps=6, control_frequency=50.0, fast_mode=True,
                                 action_horizon=1, task={"task_id": "pick", "parameters": dict(parameters)})
        finally:
            policy.close()
            client.cancel(job_id)
        assert out["status"] == "success", out
        assert "error" not in served, served
    assert len(remote.seen) == 6
    for seen in remote.seen:
        images = {k[: -len(".image")]: v for k, v in seen.items() if k.endswith(".image")}
        assert {name: shape for name, (shape, _, _) in images.items()} == expected
        assert all(dtype == "uint8" for _, dtype, _ in images.values())
        if "scene" in images:  # the table, the arms and the cube, rendered (the wrist looks up at the dark sky here)
            assert images["scene"][2] > 20
        for name in expected:  # each camera's age and stamp travel beside its image
            assert seen[f"{name}.image_age_s"] == "float" and seen[f"{name}.image_stamp_ns"] == "float"
        assert not any(k.startswith(("scene.", "wrist.")) and k.split(".")[0] not in expected for k in seen)


def test_a_camera_the_station_does_not_have_ends_the_episode_with_an_error_naming_it(tmp_path):
    from strands_robots.cameras.config import load_camera_set
    from strands_robots.client.evaluation_client import task_from_dict
    from strands_robots.wire.pb_model import task_from_pb
    from strands_robots.simulation import Simulation

    parameters = {"cameras": "scene,wrist"}
    sent = dict(yes_no_task(), parameters=parameters)
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[sent], episodes=1)
        remote = ShapePolicy()
        _serve(client, job_id, remote)
        creds = RelayCredentials(targets=(relay.target,), station_id="sim_station", token=STATION_TOKENS["sim_station"])
        policy = relay_policy.relay_policy_factory(creds)({"job_id": job_id, "episode_id": "ep_0000",
                                                           "task": task_to_mapping(task_from_pb(task_from_dict(sent))),
                                                           "attach_timeout_s": 20.0, "reply_timeout_s": 20.0})
        sim = Simulation.with_robot("alice", cameras=load_camera_set().select(["scene"]))  # no wrist camera
        try:
            out = sim.run_policy("alice", policy, n_steps=3, control_frequency=50.0, fast_mode=True,
                                 action_horizon=1, task={"task_id": "pick", "parameters": dict(parameters)})
        finally:
            policy.close()
            client.cancel(job_id)
    episode = out["episodes"][0]
    assert episode["outcome"] == "error" and episode["error_type"] == "CameraRequestError", episode
    assert "asks for camera(s) wrist; this station's observations hold scene" in episode["error_message"], episode
    assert remote.seen == []  # nothing reached the policy
