"""Shared pieces of the web status page tests: snapshots with every kind of episode, and a small HTTP client.

The client keeps cookies and never follows redirects (so each answer is seen as the server gave it).

Nothing here is a test.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import time
from typing import Dict, Optional, Tuple
from urllib.parse import urlencode

from strands_robots.client import pb

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver")
                                                else None)


def headless_chromium(tmp_path):
    """Return a Selenium driver of headless Chromium (Debian's, by path: Selenium's own manager never downloads one).

    The caller skips first where :data:`CHROMIUM` or :data:`CHROMEDRIVER` is None, and quits the driver.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions",
                f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "driver.log")),
                            options=options)


def episode(index: int, *, end="timeout", success=True, scored=True, taken_over=False, detail="", count=None):
    """One finished episode of the yes/no pick task (and a count item when ``count`` is given)."""
    result = pb.EpisodeResult(episode_id=f"ep_{index:04d}", end_condition=end, scored=scored, taken_over=taken_over,
                              end_detail=detail, run_id=f"run-{index}")
    result.task.task_id = "pick"
    result.task.instruction = "pick up the cube"
    result.task.scoring.items.add(name="placed", question="Is the cube in the bin?",
                                  answer_type=pb.ANSWER_TYPE_YES_NO, max_points=1.0, success_answer="yes")
    if scored:
        result.success = success
        result.items.add(name="placed", question="Is the cube in the bin?", answer_type=pb.ANSWER_TYPE_YES_NO,
                         yes_no=success, points=1.0 if success else 0.0, max_points=1.0, is_success_item=True)
        if count is not None:
            result.task.scoring.items.add(name="stacked", question="How many cubes are stacked?",
                                          answer_type=pb.ANSWER_TYPE_COUNT, max_points=3.0, points_per_unit=1.0)
            result.items.add(name="stacked", question="How many cubes are stacked?", answer_type=pb.ANSWER_TYPE_COUNT,
                             count=count, points=float(min(count, 3)), max_points=3.0)
        earned = sum(i.points for i in result.items)
        result.score = earned / sum(i.max_points for i in result.items)
    return result


def snapshot(job_id: str, sequence: int, episodes=(), state="RUNNING", total=4, message="", station="sim_station"):
    status = pb.JobStatus(job_id=job_id, station_id=station, state=state, episodes_total=total,
                          updated_unix_ms=int(time.time() * 1000),  # the relay orders by sequence, not this
                          message=message or f"{state} #{sequence}", sequence=sequence)
    status.episodes.extend(episodes)
    return status


class Http:
    """HTTP/1.1 to one server; keeps the cookies it was given (name -> value), follows no redirect."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host, self.port = host, port
        self.cookies: Dict[str, str] = {}
        self.set_cookie_headers: list = []

    def request(self, method: str, path: str, form: Optional[dict] = None, headers: Optional[dict] = None,
                body: Optional[bytes] = None, timeout: float = 10.0) -> Tuple[int, http.client.HTTPMessage, str]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            send = dict(headers or {})
            if self.cookies:
                send["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            if form is not None:
                body = urlencode(form).encode()
                send["Content-Type"] = "application/x-www-form-urlencoded"
            conn.request(method, path, body=body, headers=send)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            for header in response.headers.get_all("Set-Cookie") or []:
                self.set_cookie_headers.append(header)
                name, _, rest = header.partition("=")
                value = rest.split(";", 1)[0]
                if value in ("", '""') or "Max-Age=0" in header:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = value
            return response.status, response.headers, text
        finally:
            conn.close()

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict, **kw):
        return self.request("POST", path, form=form, **kw)

    def sign_in(self, token: str) -> Tuple[int, http.client.HTTPMessage, str]:
        _, _, form_page = self.get("/signin")
        return self.post("/signin", {"csrf": csrf_of(form_page), "token": token})


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f.]+)"', page)
    assert found, f"no CSRF field in the page: {page[:400]}"
    return found.group(1)


def read_events(port: int, path: str, cookies: Dict[str, str], until, timeout_s: float = 15.0) -> list:
    """Read the server-sent events of ``path`` until ``until(events)`` is true; return [(event, data), ...]."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    events: list = []
    try:
        conn.request("GET", path, headers={"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
                                           "Accept": "text/event-stream"})
        response = conn.getresponse()
        assert response.status == 200, (response.status, response.read()[:400])
        name, data = "message", []
        while time.monotonic() < deadline:
            line = response.fp.readline().decode("utf-8")
            if not line:
                break
            line = line.rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                events.append((name, "\n".join(data)))
                name, data = "message", []
                if until(events):
                    return events
        raise AssertionError(f"the events wanted did not come within {timeout_s} s: {events!r}")
    finally:
        conn.close()


_COMPRESSED_IMAGE = """std_msgs/Header header
string format
uint8[] data
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""


def camera_jpeg(width: int = 160, height: int = 120) -> bytes:
    """Return a JPEG of a red square on a blue-gray table, made with Pillow."""
    import io

    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (96, 112, 128))
    ImageDraw.Draw(image).rectangle((width // 3, height // 3, width // 2, height // 2), fill=(220, 30, 30))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def camera_recording(path, frames=3, padding_messages=0, image_format=None) -> bytes:
    """Write an MCAP like a station's episode recording; return its first camera frame's bytes.

    ``padding_messages`` status messages come first, then ``frames`` CompressedImage frames of the scene camera
    (the first one :func:`camera_jpeg`), their ``format`` the camera node's (``image_format`` None) or the given.
    """
    from mcap_ros2.writer import Writer

    from strands_robots.conversions.camera import COMPRESSED_FORMAT

    image_format = COMPRESSED_FORMAT if image_format is None else image_format

    first = camera_jpeg()
    with open(path, "wb") as handle:
        writer = Writer(handle)
        image = writer.register_msgdef("sensor_msgs/msg/CompressedImage", _COMPRESSED_IMAGE)
        text = writer.register_msgdef("std_msgs/msg/String", "string data\n")
        for i in range(padding_messages):
            writer.write_message("/arm/status", text, {"data": f"step {i}" * 50}, log_time=i, publish_time=i)
        for i in range(frames):
            data = first if i == 0 else camera_jpeg(80 + i, 60)
            t = padding_messages + i
            writer.write_message("/sim/scene/image_raw/compressed", image,
                                 {"header": {"stamp": {"sec": t, "nanosec": 0}, "frame_id": "scene"},
                                  "format": image_format, "data": data}, log_time=t, publish_time=t)
        writer.finish()
    return first
