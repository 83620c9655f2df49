"""An image request the station can never serve is refused at submit with the reason, never blamed on the station.

Bounded by what the station's cameras render, what one relay message holds and what the station encodes in a
control period (``cameras.image_budget``), checked by the shared job validation, the relay's submit and the
station's submit (which knows its cameras).
"""

from __future__ import annotations

import numpy as np
import pytest

from strands_robots.cameras.image_budget import (
    ENCODE_PIXELS_PER_S,
    OBSERVATION_MARGIN_BYTES,
    image_request_refusal,
    worst_case_bytes,
)
from strands_robots.cameras.request import image_request
from strands_robots.client.images import encode_image
from strands_robots.relay.job_request import InvalidJob, check_submit
from strands_robots.wire.pb_model import task_to_pb
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job import JobSpecError, validate_job_spec
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.provenance import load_station_facts
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.station import Station

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
MIB = 1024 * 1024


def relay_job(job_id="job-images", **parameters):
    return job_spec_from_mapping({
        "job_id": job_id, "client_id": "team_a", "station_id": "sim_station", "episodes_total": 1,
        "policy": {"provider": "relay"},
        "tasks": [{"task_id": "look", "instruction": "look", "parameters": parameters, "scoring": SHEET}]})


def test_two_4096_png_images_are_refused_at_submit_naming_what_one_relay_message_holds():
    with pytest.raises(JobSpecError) as caught:
        relay_job(cameras="scene:4096x4096,wrist:4096x4096", image_format="png")
    text = str(caught.value)
    assert text.startswith("tasks[0].parameters: cameras='scene:4096x4096,wrist:4096x4096', image_format='png' "
                           "refused: one observation's images (scene 4096x4096, wrist 4096x4096 as png) can take")
    assert f"more than the {16 * MIB - OBSERVATION_MARGIN_BYTES} bytes a relay message of {16 * MIB} bytes" in text
    # The relay refuses the same job at SubmitJob, before it is stored.
    request = es.SubmitJobRequest(station_id="sim_station", episodes=1,
                                  tasks=[task_to_pb(relay_job(cameras="scene:224x224").tasks[0])])
    request.tasks[0].parameters.update({"cameras": "scene:4096x4096,wrist:4096x4096", "image_format": "png"})
    with pytest.raises(InvalidJob, match="can take .* bytes encoded"):
        check_submit(request, "team_a", {"sim_station"})


def test_a_relay_with_a_smaller_message_refuses_images_its_messages_cannot_carry():
    request = es.SubmitJobRequest(station_id="sim_station", episodes=1,
                                  tasks=[task_to_pb(relay_job(cameras="scene:1024x1024", image_format="png",
                                                              control_frequency="5").tasks[0])])
    assert check_submit(request, "team_a", {"sim_station"})  # 3 MiB of PNG fits the default 16 MiB
    with pytest.raises(InvalidJob, match=f"a relay message of {MIB} bytes"):
        check_submit(request, "team_a", {"sim_station"}, max_message_bytes=MIB)


def test_encoding_past_one_control_period_is_refused_naming_the_rate():
    with pytest.raises(JobSpecError) as caught:
        relay_job(cameras="scene:1024x1024", image_format="png", control_frequency="50")
    text = str(caught.value)
    assert "encoding one observation's images (scene 1024x1024 as png, 1048576 pixels) takes about 87.4 ms" in text
    assert f"at the {ENCODE_PIXELS_PER_S['png'] / 1e6:g} Mpx/s a station is held to" in text
    assert "more than one control period (20.0 ms at 50 Hz)" in text
    validate_job_spec(relay_job(cameras="scene:1024x1024", image_format="jpeg", control_frequency="50"))
    validate_job_spec(relay_job(cameras="scene:1024x1024", image_format="png", control_frequency="10"))


def test_a_station_refuses_at_submit_what_its_cameras_do_not_render_and_takes_what_they_do():
    facts = load_station_facts(cameras=["scene", "wrist"])
    operator = ScriptedOperator()
    station = Station("sim_station", InProcessRobot(), operator, settings=ProcedureSettings(station_facts=facts))
    try:
        reply = station.submit(relay_job("job-big", cameras="scene:448x448"))
        assert not reply.accepted and station.status("job-big") is None
        assert "scene:448x448 asks for more than camera scene renders (224x224); ask for at most 224x224" in \
            reply.message
        reply = station.submit(relay_job("job-top", cameras="top:224x224"))
        assert not reply.accepted and station.status("job-top") is None
        assert reply.message == ("job refused: the job asks for cameras this station does not have (1 request(s); "
                                 "no arm moved): 1. task 'look' asks for camera 'top': this station has no such "
                                 "camera (its cameras: scene, wrist)")
        for job_id, params in (("job-every", {}), ("job-png", {"image_format": "png"}),
                               ("job-small", {"cameras": "scene:112x112,wrist"})):
            reply = station.submit(relay_job(job_id, **params))
            assert reply.accepted, (job_id, reply.message)
    finally:
        operator.close()


def test_every_unknown_camera_of_every_task_is_named_at_arrival_and_no_arm_moved():
    facts = load_station_facts(cameras=["scene", "wrist"])
    robot = InProcessRobot()
    operator = ScriptedOperator()
    station = Station("sim_station", robot, operator, settings=ProcedureSettings(station_facts=facts))
    job = job_spec_from_mapping({
        "job_id": "job-two-unknown", "client_id": "team_a", "station_id": "sim_station", "episodes_total": 3,
        "policy": {"provider": "mock"},  # a station's own provider too: the cameras are the station's to check
        "tasks": [{"task_id": "high", "instruction": "look", "parameters": {"cameras": "top,scene"}, "scoring": SHEET},
                  {"task_id": "low", "instruction": "look", "parameters": {"cameras": "belly:64x64"},
                   "scoring": SHEET},
                  {"task_id": "fine", "instruction": "look", "parameters": {"cameras": "wrist"}, "scoring": SHEET}]})
    try:
        reply = station.submit(job)
        assert not reply.accepted and station.status("job-two-unknown") is None
        assert "(2 request(s); no arm moved)" in reply.message
        assert "1. task 'high' asks for camera 'top'" in reply.message
        assert "2. task 'low' asks for camera 'belly'" in reply.message
        assert "wrist'" not in reply.message.split("its cameras")[0]
        assert robot.lease.state().lease_id == ""  # never granted: no arm moved
    finally:
        operator.close()


def test_a_station_not_saying_what_it_observes_checks_named_cameras_against_its_camera_file():
    facts = load_station_facts(cameras=[])  # its `cameras` parameter empty: the rollout node's are not known here
    assert facts.job_refusal(relay_job(cameras="scene:224x224,wrist", image_format="png")) == ""
    assert "asks for more than camera wrist renders (224x224)" in facts.job_refusal(relay_job(cameras="wrist:640x480"))
    assert facts.job_refusal(relay_job(image_format="png", control_frequency="2000")) == ""  # every camera: unknown


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
@pytest.mark.parametrize("width,height", [(64, 48), (320, 240), (1024, 769)])
def test_the_worst_case_bytes_bound_what_the_encoder_writes_for_uncompressible_frames(fmt, width, height):
    noise = np.random.default_rng(width * height).integers(0, 256, (height, width, 3), dtype=np.uint8)
    encoded = encode_image(noise, fmt, 95)
    assert len(encoded.data) <= worst_case_bytes(width, height, fmt), (len(encoded.data), fmt)


def test_no_camera_asked_or_none_named_costs_nothing():
    assert image_request_refusal(image_request({"cameras": "none"}), {"scene": (4096, 4096)}, 2000.0, 1024) == ""
    assert image_request_refusal(image_request({}), {}, 2000.0, 1024) == ""
