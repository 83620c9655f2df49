"""The monitor's camera thumbnails offscreen, fed by a real camera node process (MuJoCo renders over DDS).

Runs with QT_QPA_PLATFORM=offscreen and PyQt5 (or python_qt_binding); skips where neither is installed. The
widget finds the cameras in the ROS graph by itself; each thumbnail must be its own camera's frame.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from monitor_helpers import REPO  # noqa: E402

try:
    import rqt_strands_robots  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "src" / "rqt_strands_robots"))
try:
    from rqt_strands_robots.qt import QtWidgets
except ImportError as exc:  # no Qt binding at all
    pytest.skip(f"no Qt binding ({exc}); pip install PyQt5", allow_module_level=True)

from test_camera_node import CameraProcess  # noqa: E402  (the camera node process and a probe playing the driver)

from strands_robots.cameras import jpeg  # noqa: E402

SCREENSHOT = os.environ.get("STRANDS_ROBOTS_MONITOR_SCREENSHOT", "")  # docs/monitor_cameras.png when asked


@pytest.fixture(scope="module")
def app():
    return QtWidgets.QApplication.instance() or QtWidgets.QApplication(["test"])


def pump(app, widget, predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.processEvents()
        widget.drain()
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def pixmap_array(label) -> np.ndarray:
    image = label.pixmap().toImage().convertToFormat(4)  # QImage.Format_RGB32: B, G, R, 255 per pixel
    ptr = image.bits()
    ptr.setsize(image.height() * image.bytesPerLine())
    rows = np.frombuffer(bytes(ptr), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : image.width() * 4].reshape(image.height(), image.width(), 4)[..., 2::-1]


def test_the_monitor_shows_a_live_thumbnail_per_camera_of_a_real_camera_node(app, tmp_path):
    from PIL import Image

    from rqt_strands_robots.monitor_widget import MonitorWidget

    cam = CameraProcess()  # its probe node spins in the camera process's context; the widget uses the same node
    widget = MonitorWidget(cam.node, namespace=cam.ns)
    try:
        widget.resize(1280, 760)
        widget.show()
        assert pump(app, widget, lambda: set(widget.cameras_view.sizes) == {"scene", "wrist"}), \
            f"thumbnails: {sorted(widget.cameras_view.sizes)}; node output:\n{''.join(cam.lines[-20:])}"
        first = {c: widget.cameras_view.stats.arrivals[c][-1][1] for c in ("scene", "wrist")}
        assert pump(app, widget, lambda: all(widget.cameras_view.stats.arrivals[c][-1][1] >= first[c] + 5
                                             for c in first)), "the thumbnails stopped updating"
        captions = {c: widget.cameras_view.captions[c].text() for c in ("scene", "wrist")}
        shown = {c: pixmap_array(widget.cameras_view.images[c]) for c in ("scene", "wrist")}
        latest = {c: jpeg.decode(bytes(cam.latest(f"{c}/image_raw/compressed").data)) for c in ("scene", "wrist")}
        if SCREENSHOT:
            assert widget.grab().save(SCREENSHOT)
        grab = widget.grab()
    finally:
        widget.shutdown()
        widget.deleteLater()
        cam.close()
    assert not grab.isNull() and grab.width() == 1280
    assert widget.cameras_view.sizes == {"scene": (224, 224), "wrist": (224, 224)}
    for c in ("scene", "wrist"):
        assert shown[c].shape == (200, 200, 3)                      # 224x224 scaled to the thumbnail width
        assert "224x224" in captions[c] and "fps" in captions[c], captions[c]
        rate = widget.cameras_view.stats.rate_hz(c)
        assert rate is not None and 5.0 < rate < 30.0, rate          # the cameras run at 15 fps
        expected = np.asarray(Image.fromarray(latest[c]).resize((200, 200), Image.BILINEAR)).astype(int)
        own = np.abs(shown[c].astype(int) - expected).mean()
        other = latest["wrist" if c == "scene" else "scene"]
        other_diff = np.abs(shown[c].astype(int) - np.asarray(Image.fromarray(other).resize((200, 200))).astype(int)
                            ).mean()
        assert own < 8.0 < other_diff, f"{c}: thumbnail vs its frame {own:.1f}, vs the other camera {other_diff:.1f}"
