"""--foxglove: a real WebSocket client subscribes to the live server and decodes the CDR it receives."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import time

import pytest

pytest.importorskip("foxglove", reason="foxglove-sdk is not installed (pip install foxglove-sdk)")
websockets = pytest.importorskip("websockets", reason="the websockets client package is not installed")

from mcap_ros2._dynamic import generate_dynamic  # noqa: E402
from monitor_helpers import Publishers, job_status_dict, start_module, step, stop_process  # noqa: E402

from strands_robots.rollout.msg_schema import full_text  # noqa: E402

NS = "fox_test"
SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]


async def subscribe_and_take(url: str, topics: list[str], wanted: int, timeout_s: float = 20.0):
    """Connect, subscribe to ``topics`` once advertised, return (advertised channels, [(topic, payload)])."""
    channels: dict[int, dict] = {}
    subscribed: dict[int, int] = {}   # subscription id -> channel id
    received: list[tuple[str, bytes]] = []
    async with websockets.connect(url, subprotocols=SUBPROTOCOLS) as ws:
        deadline = time.monotonic() + timeout_s
        while len(received) < wanted and time.monotonic() < deadline:
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=1.0)
            except asyncio.TimeoutError:
                continue
            if isinstance(frame, str):
                message = json.loads(frame)
                if message.get("op") == "advertise":
                    new = []
                    for ch in message["channels"]:
                        channels[ch["id"]] = ch
                        if ch["topic"] in topics:
                            sub_id = len(subscribed) + 1
                            subscribed[sub_id] = ch["id"]
                            new.append({"id": sub_id, "channelId": ch["id"]})
                    if new:
                        await ws.send(json.dumps({"op": "subscribe", "subscriptions": new}))
                continue
            opcode = frame[0]
            if opcode == 0x01:  # message data: subscription id (u32), log time (u64), payload
                sub_id, _log_time = struct.unpack_from("<IQ", frame, 1)
                received.append((channels[subscribed[sub_id]]["topic"], bytes(frame[13:])))
    return channels, received


def decode(channel: dict, payload: bytes):
    decoders = generate_dynamic(channel["schemaName"], channel["schema"])
    return decoders[channel["schemaName"]](payload)


@pytest.mark.parametrize("command", ["foxglove", "record --foxglove"])
def test_foxglove_client_subscribes_and_decodes_live_and_latched_messages(ros_context, tmp_path, command):
    pubs = Publishers(ros_context, NS)
    if command == "foxglove":
        proc = start_module("strands_robots.monitoring.foxglove_live", "--namespace", NS, "--port", "0")
    else:
        proc = start_module("strands_robots.monitoring.record", "-o", str(tmp_path / "both.mcap"), "--namespace",
                            NS, "--foxglove", "--foxglove-port", "0", "--latch-wait", "0.5")
    try:
        line = proc.stdout.readline()
        match = re.search(r"ws://(127\.0\.0\.1):(\d+)", line)
        assert match, f"no server address printed: {line!r}"
        assert pubs.wait_subscribed("job_status") and pubs.wait_subscribed("observer_events")
        time.sleep(0.5)
        # latched: published before any Foxglove client exists
        pubs.publish_dict("job_status", "strands_robots_msgs/msg/JobStatus", job_status_dict("job-fox"))
        time.sleep(0.5)

        stop = False

        async def publish_steps():
            index = 0
            while not stop:
                pubs.publish_event(step("run-f", index + 1, index))
                index += 1
                await asyncio.sleep(0.1)

        async def scenario():
            nonlocal stop
            pusher = asyncio.ensure_future(publish_steps())
            try:
                return await subscribe_and_take(f"ws://127.0.0.1:{match.group(2)}",
                                                [f"/{NS}/job_status", f"/{NS}/observer_events"], wanted=3)
            finally:
                stop = True
                await pusher

        channels, received = asyncio.run(scenario())
    finally:
        stdout, stderr = stop_process(proc)
        pubs.destroy()
    by_topic = {ch["topic"]: ch for ch in channels.values()}
    assert f"/{NS}/joint_states" in by_topic and "/diagnostics" in by_topic
    job_channel = by_topic[f"/{NS}/job_status"]
    assert job_channel["encoding"] == "cdr" and job_channel["schemaEncoding"] == "ros2msg"
    assert job_channel["schema"] == full_text("strands_robots_msgs/msg/JobStatus")
    topics = [t for t, _ in received]
    assert f"/{NS}/job_status" in topics, f"the latched job status never reached the client: {topics}"
    job = decode(job_channel, next(p for t, p in received if t == f"/{NS}/job_status"))
    assert job.job_id == "job-fox" and job.state == "RUNNING"
    event = decode(by_topic[f"/{NS}/observer_events"], next(p for t, p in received if t == f"/{NS}/observer_events"))
    assert event.kind == "step" and event.run_id == "run-f"
    assert event.step[0].action_resolution == "full"
    assert proc.returncode == 0, stderr
    if command != "foxglove":  # the same messages went into the file
        assert "wrote" in stdout and (tmp_path / "both.mcap").stat().st_size > 0


def test_foxglove_streams_the_camera_jpegs_and_camera_info_of_a_real_camera_node():
    from test_camera_node import CameraProcess  # the camera node process and a probe playing the driver

    from strands_robots.cameras import jpeg

    cam = CameraProcess()
    proc = start_module("strands_robots.monitoring.foxglove_live", "--namespace", cam.ns, "--port", "0",
                        "--topics", "job_status")
    try:
        match = re.search(r"ws://(127\.0\.0\.1):(\d+)", proc.stdout.readline())
        assert match, "no server address printed"
        cam.wait_new("scene/image_raw/compressed", n=3)
        wanted = [f"{cam.ns}/scene/image_raw/compressed", f"{cam.ns}/wrist/image_raw/compressed",
                  f"{cam.ns}/scene/camera_info"]
        channels, received = asyncio.run(subscribe_and_take(f"ws://127.0.0.1:{match.group(2)}", wanted, wanted=12,
                                                            timeout_s=60.0))
    finally:
        stdout, stderr = stop_process(proc)
        cam.close()
    by_topic = {ch["topic"]: ch for ch in channels.values()}
    assert set(wanted) <= set(by_topic), sorted(by_topic)
    image_channel = by_topic[wanted[0]]
    assert image_channel["schemaName"] == "sensor_msgs/msg/CompressedImage"
    assert image_channel["encoding"] == "cdr" and image_channel["schemaEncoding"] == "ros2msg"
    got = {t for t, _ in received}
    assert set(wanted) <= got, f"not every camera topic reached the client: {got}"
    for topic in wanted[:2]:
        msg = decode(image_channel, next(p for t, p in received if t == topic))
        assert msg.format == "rgb8; jpeg compressed bgr8"
        assert jpeg.decode(bytes(msg.data)).shape == (224, 224, 3)
        assert msg.header.frame_id == f"{topic.split('/')[-3]}_optical_frame"
    info = decode(by_topic[wanted[2]], next(p for t, p in received if t == wanted[2]))
    assert (info.width, info.height, info.distortion_model) == (224, 224, "plumb_bob")
    assert proc.returncode == 0, stderr
