"""The monitor's "Clear safety stop" button: the model says when a clear is wanted, the button calls the station.

Offscreen Qt (QT_QPA_PLATFORM=offscreen, PyQt5 or python_qt_binding), as the other monitor tests; the button's
call goes over DDS to a ClearSafetyStop server (a stand-in that keeps the request, and the real station node).
"""

from __future__ import annotations

import os
import sys
import time

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from monitor_helpers import REPO, job_status_dict, safety_stop_dict  # noqa: E402

try:
    import rqt_strands_robots  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "src" / "rqt_strands_robots"))

from rqt_strands_robots.monitor_model import SAFETY_WAIT_PREFIX, MonitorModel  # noqa: E402

WAITING = f"{SAFETY_WAIT_PREFIX}: right: joint 4 reads +4.5 N*m"


def test_a_clear_is_wanted_while_the_job_waits_on_a_stop_or_a_stop_is_in_force():
    model = MonitorModel()
    assert model.safety_clear_wanted() == ""
    model.on_job_status({**job_status_dict("job-s"), "message": WAITING})
    assert model.safety_clear_wanted() == WAITING
    model.on_job_status({**job_status_dict("job-s"), "message": "ep_0001 starting: ann cleared the safety stop: x"})
    assert model.safety_clear_wanted() == ""
    model.on_safety_stop(safety_stop_dict())
    assert model.safety_clear_wanted().startswith("safety stop in force: right: joint 4 reads +3.4 N*m")
    model.on_safety_stop({"stopped": False, "checks": [], "detail": ""})
    assert model.safety_clear_wanted() == ""


def _qt():
    try:
        from rqt_strands_robots.qt import QtWidgets
    except ImportError as exc:
        pytest.skip(f"no Qt binding ({exc}); pip install PyQt5")
    return QtWidgets.QApplication.instance() or QtWidgets.QApplication(["test"])


def pump(app, widget, predicate, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.processEvents()
        widget.drain()
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def test_the_button_calls_clear_safety_stop_under_the_operator_name_and_shows_the_answer(ros_context):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots_msgs.srv import ClearSafetyStop

    from rqt_strands_robots.monitor_widget import MonitorWidget
    from strands_robots.ros.process import spin_in_background

    app = _qt()
    calls = []

    def answer(request, response):
        calls.append(request.operator_name)
        response.ok, response.message = True, f"{request.operator_name} asked to clear the safety stop (x)"
        return response

    station = rclpy.create_node("station", namespace="clear_test", context=ros_context)
    station.create_service(ClearSafetyStop, "clear_safety_stop", answer)
    node = rclpy.create_node("monitor_clear_test", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(station)
    spin = spin_in_background(executor, "test-monitor-clear")
    widget = MonitorWidget(node, namespace="clear_test", operator_name="carol")
    try:
        # What the station says arrives on the inbox (as its job_status subscription puts it there).
        widget.inbox.put(("job_status", {**job_status_dict("job-s"), "message": WAITING}))
        widget.drain()
        assert "font-weight: bold" in widget.clear_safety_button.styleSheet()
        assert widget.clear_safety_button.toolTip() == WAITING
        assert pump(app, widget, lambda: widget.link.ready("clear_safety_stop"))
        widget.clear_safety_button.click()
        assert pump(app, widget, lambda: widget.reply_label.text().startswith("clear_safety_stop"))
        assert widget.reply_label.text() == "clear_safety_stop: ok — carol asked to clear the safety stop (x)"
        assert calls == ["carol"]
        widget.inbox.put(("job_status", {**job_status_dict("job-s"), "message": "ep_0001 running"}))
        widget.drain()
        assert widget.clear_safety_button.styleSheet() == ""
    finally:
        widget.shutdown()
        executor.shutdown()
        spin.join(5.0)
        node.destroy_node()
        station.destroy_node()


def test_the_real_station_refuses_a_clear_when_no_job_waits_on_a_stop(ros_context, tmp_path):
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from rqt_strands_robots.monitor_widget import MonitorWidget
    from strands_robots.ros.process import spin_in_background
    from strands_robots.nodes.station.node import StationNode

    app = _qt()
    station = StationNode(context=ros_context, namespace="clear_real_station",
                          parameter_overrides=[Parameter("state_dir", value=str(tmp_path / "state")),
                                               Parameter("operator", value="manual")])
    node = rclpy.create_node("monitor_clear_real", context=ros_context)
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(station)
    executor.add_node(node)
    spin = spin_in_background(executor, "test-clear-real-station")
    widget = MonitorWidget(node, namespace="clear_real_station", operator_name="carol")
    try:
        assert pump(app, widget, lambda: widget.link.ready("clear_safety_stop"))
        widget.clear_safety_button.click()
        assert pump(app, widget, lambda: widget.reply_label.text().startswith("clear_safety_stop"))
        assert widget.reply_label.text().startswith("clear_safety_stop: refused — no job is running")
    finally:
        widget.shutdown()
        station.close()
        executor.shutdown()
        spin.join(5.0)
        node.destroy_node()
        station.destroy_node()
