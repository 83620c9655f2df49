"""The monitor widget offscreen: real messages over DDS in, the operator buttons calling a real service server.

Runs with QT_QPA_PLATFORM=offscreen and PyQt5 (or python_qt_binding); skips where neither is installed.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from monitor_helpers import (REPO, Publishers, driver_status_dict, ended, job_status_dict, lease_dict,  # noqa: E402
                             episode_dict, safety_stop_dict, start_module, started, step, stop_process)

try:
    import rqt_strands_robots  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "src" / "rqt_strands_robots"))
try:
    from rqt_strands_robots.qt import QtWidgets
except ImportError as exc:  # no Qt binding at all
    pytest.skip(f"no Qt binding ({exc}); pip install PyQt5", allow_module_level=True)

NS = "mon_test"


@pytest.fixture(scope="module")
def app():
    return QtWidgets.QApplication.instance() or QtWidgets.QApplication(["test"])


class OperatorServices:
    """A station stand-in serving the operator srv types and keeping every request it got."""

    def __init__(self, context, namespace: str) -> None:
        import rclpy
        from strands_robots_msgs.srv import Discard, Resume, SubmitScoreSheet, Takeover

        self.node = rclpy.create_node("station", namespace=namespace, context=context)
        self.calls: list = []
        self.node.create_service(Takeover, "takeover", self._answer("takeover", True, "rollout paused"))
        self.node.create_service(Resume, "resume", self._answer("resume", False, "no takeover is in force"))
        self.node.create_service(Discard, "discard", self._answer("discard", True, "discarded"))
        self.node.create_service(SubmitScoreSheet, "submit_score_sheet", self._answer("sheet", True, "scored 0.75"))

    def _answer(self, name, ok, message):
        def handle(request, response):
            self.calls.append((name, request))
            response.ok, response.message = ok, message
            return response
        return handle


def pump(app, widget, predicate, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.processEvents()
        widget.drain()
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def test_widget_shows_live_streams_and_operator_buttons_reach_the_station(app, ros_context, tmp_path):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from rqt_strands_robots.monitor_widget import MonitorWidget
    from strands_robots.ros.process import spin_in_background

    pubs = Publishers(ros_context, NS)
    station = OperatorServices(ros_context, NS)
    node = rclpy.create_node("monitor_under_test", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(station.node)
    spin = spin_in_background(executor, "test-monitor")
    widget = MonitorWidget(node, namespace=NS, operator_name="alice")
    try:
        widget.resize(1280, 720)
        widget.show()
        # latched state before the widget exists is fine; publish it now, then the stream with a gap
        pubs.publish_dict("job_status", "strands_robots_msgs/msg/JobStatus", job_status_dict("job-mon", episodes=[
            episode_dict("ep_0000", run_id="r0"), episode_dict("ep_0001", "safety_stop", scored=False,
                                                               taken_over=True)]))
        pubs.publish_dict("safety_stop", "strands_robots_msgs/msg/SafetyStop", safety_stop_dict())
        pubs.publish_dict("lease_state", "strands_robots_msgs/msg/LeaseState", lease_dict("station"))
        pubs.publish_dict("driver_status", "strands_robots_msgs/msg/DriverStatus", driver_status_dict())
        assert pubs.wait_subscribed("observer_events")
        time.sleep(0.5)
        events = [started("run-m"), step("run-m", 1, 0), step("run-m", 2, 1, resolution="partial",
                                                            unresolved=("left.joint_2",), reasons=("outside_limits",),
                                                            age=3, missed=True),
                  # seq 3 and 4 never sent: a gap
                  step("run-m", 5, 4), ended("run-m", 6, stopped_reason="safety_stop",
                                             detail="right: joint 4 reads +3.4 N*m", failures=1, missed=2)]
        for event in events:
            pubs.publish_event(event)
        assert pump(app, widget, lambda: widget.model.runs.get("run-m") is not None
                    and widget.model.runs["run-m"].ended is not None and widget.model.safety is not None
                    and widget.model.job is not None and widget.model.lease is not None), "streams never arrived"
        view = widget.model.runs["run-m"]
        assert view.steps == 3 and dict(view.resolutions) == {"full": 2, "partial": 1}
        assert view.gaps == [(3, 4)] and view.lost == 2
        assert view.age_max == 3 and view.late_steps == 1
        # what the widget displays is the model's
        assert widget.steps_table.rowCount() == 3
        assert widget.steps_table.item(1, 2).text() == "left.joint_2 (outside_limits)"
        assert "event_seq gaps: 1 (2 events lost); missing 3..4" in widget.summary_text.toPlainText()
        safety = widget.safety_text.toPlainText()
        assert "right: joint 4 reads +3.4 N*m" in safety and "left: joint 2 reads -2.6 rad/s" in safety
        assert widget.lease_label.text() == "lease: held, holder station (priority 10)"
        assert widget.job_label.text().startswith("job job-mon: RUNNING, 2/3 episodes")
        assert widget.episodes_table.rowCount() == 2
        assert widget.episodes_table.item(1, 5).text() == "yes"  # taken over

        # operator buttons: the station stand-in gets each call with the fields from the widget
        assert pump(app, widget, lambda: all(widget.link.ready(s) for s in
                                             ("takeover", "resume", "discard", "submit_score_sheet")))
        widget.takeover_button.click()
        assert pump(app, widget, lambda: widget.reply_label.text().startswith("takeover"))
        assert widget.reply_label.text() == "takeover: ok — rollout paused"
        widget.resume_button.click()
        assert pump(app, widget, lambda: widget.reply_label.text().startswith("resume"))
        assert widget.reply_label.text() == "resume: refused — no takeover is in force"
        widget.episode_edit.setText("ep_0001")
        widget.discard_button.click()
        widget.answers_edit.setText("success=yes, cubes_stacked=3")
        widget.sheet_button.click()
        assert pump(app, widget, lambda: len(station.calls) == 4)
        by_name = dict(station.calls)
        assert by_name["takeover"].operator_name == "alice"
        assert by_name["resume"].operator_name == "alice"
        assert by_name["discard"].episode_id == "ep_0001"
        sheet = by_name["sheet"]
        assert sheet.episode_id == "ep_0001"
        assert [(a.name, a.answer) for a in sheet.answers] == [("success", "yes"), ("cubes_stacked", "3")]

        shot = tmp_path / "monitor.png"
        assert widget.grab().save(str(shot))
        assert shot.read_bytes()[:4] == b"\x89PNG"
        if os.environ.get("STRANDS_MONITOR_SCREENSHOT"):
            widget.grab().save(os.environ["STRANDS_MONITOR_SCREENSHOT"])
    finally:
        widget.shutdown()
        executor.shutdown()
        spin.join(5.0)
        node.destroy_node()
        station.node.destroy_node()
        pubs.destroy()


def test_a_malformed_score_sheet_is_refused_in_the_widget_without_a_call(app, ros_context):
    import rclpy

    from rqt_strands_robots.monitor_widget import MonitorWidget

    node = rclpy.create_node("monitor_sheet_check", context=ros_context)
    widget = MonitorWidget(node, namespace="nobody_here")
    try:
        widget.episode_edit.setText("ep_0000")
        widget.answers_edit.setText("success")
        widget.sheet_button.click()
        assert widget.reply_label.text() == "submit_score_sheet: refused — answer 'success' is not name=answer"
        widget.answers_edit.setText("success=yes")
        widget.sheet_button.click()
        widget.drain()
        assert "is not available" in widget.reply_label.text()
    finally:
        widget.shutdown()
        node.destroy_node()


def test_standalone_monitor_window_runs_offscreen_and_saves_a_screenshot(ros_context, tmp_path):
    pubs = Publishers(ros_context, NS)
    shot = tmp_path / "standalone.png"
    proc = start_module("strands_robots.monitoring.monitor_app", "--namespace", NS, "--duration", "4",
                        "--screenshot", str(shot))
    try:
        pubs.publish_dict("job_status", "strands_robots_msgs/msg/JobStatus", job_status_dict("job-standalone"))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            stop_process(proc)
        pubs.destroy()
    assert proc.returncode == 0, err
    assert shot.read_bytes()[:4] == b"\x89PNG"


def test_take_over_button_reaches_the_real_station_node(app, ros_context, tmp_path):
    """The station node itself answers: with no job running it refuses, in its own words."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from rqt_strands_robots.monitor_widget import MonitorWidget
    from strands_robots.ros.process import spin_in_background
    from strands_robots.nodes.station.node import StationNode

    station = StationNode(context=ros_context, namespace="real_station",
                          parameter_overrides=[Parameter("state_dir", value=str(tmp_path / "state")),
                                               Parameter("operator", value="manual")])
    node = rclpy.create_node("monitor_real_station", context=ros_context)
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(station)
    executor.add_node(node)
    spin = spin_in_background(executor, "test-real-station")
    widget = MonitorWidget(node, namespace="real_station")
    try:
        assert pump(app, widget, lambda: widget.link.ready("takeover") and widget.link.ready("discard"))
        widget.takeover_button.click()
        assert pump(app, widget, lambda: widget.reply_label.text().startswith("takeover"))
        assert widget.reply_label.text().startswith("takeover: refused — no job is running")
        widget.episode_edit.setText("ep_0000")
        widget.discard_button.click()
        assert pump(app, widget, lambda: widget.reply_label.text().startswith("discard"))
        assert widget.reply_label.text().startswith("discard: refused — no job is running")
    finally:
        widget.shutdown()
        station.close()
        executor.shutdown()
        spin.join(5.0)
        node.destroy_node()
        station.destroy_node()


def test_a_shown_widget_collected_after_shutdown_does_not_abort_the_process(tmp_path):
    """Qt emits editingFinished while a shown widget is destroyed; a slot raising then aborts under PyQt5."""
    import subprocess

    from monitor_helpers import subprocess_env

    script = tmp_path / "collect.py"
    script.write_text(
        "import gc, rclpy\n"
        "from rclpy.context import Context\n"
        "from rqt_strands_robots.qt import QtWidgets\n"
        "from rqt_strands_robots.monitor_widget import MonitorWidget\n"
        "app = QtWidgets.QApplication(['t'])\n"
        "ctx = Context(); rclpy.init(context=ctx)\n"
        "node = rclpy.create_node('collect_check', context=ctx)\n"
        "w = MonitorWidget(node, namespace='collect_check'); w.show(); app.processEvents()\n"
        "w.namespace_edit.setFocus(); app.processEvents()\n"
        "w.takeover_button.click(); w.drain()\n"
        "w.shutdown(); node.destroy_node()\n"
        "w.takeover_button.click()\n"
        "del w; gc.collect()\n"
        "print('collected')\n")
    env = subprocess_env()
    env["QT_QPA_PLATFORM"] = "offscreen"
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "collected" in proc.stdout, proc.stderr[-2000:]
