"""The monitor widget: the station's streams live, and the operator's actions as buttons.

The widget is given a node that somebody else spins (rqt's executor in the plugin, a background thread in
``strands-robots monitor``). ROS callbacks run on that executor's thread and never touch a widget: they put what
arrived on a queue, and a QTimer on the GUI thread drains it into the :class:`MonitorModel` and refreshes the
views. Operator buttons call the station's services with ``call_async``; the answer comes back the same way.
"Clear safety stop" calls the station's ``clear_safety_stop`` under the operator's name (the station never clears
a stop by itself); it is highlighted while the model says a clear is wanted.

Shown: the job (state, episodes with end condition, score, taken over), the lease holder, the driver, safety stops
with every check, the current run's step table with its resolution breakdown, observation age, missed
deadlines, hook outcomes, observer failures and event_seq gaps, and a live thumbnail per camera
(:mod:`~rqt_strands_robots.camera_thumbnails`: the newest ``<ns>/<camera>/image_raw/compressed`` frame).
"""

from __future__ import annotations

import queue
import time
from typing import Any, Callable

from rqt_strands_robots.camera_thumbnails import CameraFeed, CameraThumbnails
from rqt_strands_robots.monitor_model import EPISODE_COLUMNS, STEP_COLUMNS, MonitorModel
from rqt_strands_robots.qt import QtCore, QtWidgets

__all__ = ["MonitorWidget", "RosLink", "parse_answers"]

REFRESH_MS = 100
CAMERA_RESCAN_S = 1.0  # how often the graph is looked at for cameras started after the monitor
SHOWN_STEPS = 200  # newest first; the model keeps more for its figures


def _name(namespace: str, name: str) -> str:
    ns = str(namespace or "").strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


def parse_answers(text: str) -> list[tuple[str, str]]:
    """``"success=yes, cubes=3"`` → ``[("success", "yes"), ("cubes", "3")]``; ValueError names a bad item."""
    answers = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, answer = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"answer {item!r} is not name=answer")
        answers.append((name.strip(), answer.strip()))
    if not answers:
        raise ValueError("no answers given (name=answer, ...)")
    return answers


class RosLink:
    """Subscriptions and operator service clients on ``node`` under ``namespace``; everything lands on ``inbox``.

    Inbox items: ``("event", (event, dropped_before))``, ``("job_status" | "episode_result" | "safety_stop" |
    "lease_state" | "driver_status", dict)``, ``("reply", (service, ok, message))``.
    """

    def __init__(self, node: Any, namespace: str, inbox: "queue.Queue[tuple[str, Any]]") -> None:
        from strands_robots_msgs.msg import (DriverStatus, EpisodeResult, JobStatus, LeaseState, ObserverEvent,
                                             SafetyStop)
        from strands_robots_msgs.srv import ClearSafetyStop, Discard, Resume, SubmitScoreSheet, Takeover

        from strands_robots.conversions.events import msg_to_event
        from strands_robots.conversions.introspection import msg_to_dict
        from strands_robots.ros.qos import EVENT_QOS, LATCHED_QOS

        self.node, self.namespace, self.inbox = node, namespace, inbox

        def to_inbox(kind: str, convert: Callable[[Any], Any]) -> Callable[[Any], None]:
            return lambda msg: inbox.put((kind, convert(msg)))

        topics = (
            (ObserverEvent, "observer_events", EVENT_QOS, "event", lambda m: (msg_to_event(m), int(m.dropped_before))),
            (EpisodeResult, "episode_results", EVENT_QOS, "episode_result", msg_to_dict),
            (JobStatus, "job_status", LATCHED_QOS, "job_status", msg_to_dict),
            (SafetyStop, "safety_stop", LATCHED_QOS, "safety_stop", msg_to_dict),
            (LeaseState, "lease_state", LATCHED_QOS, "lease_state", msg_to_dict),
            (DriverStatus, "driver_status", LATCHED_QOS, "driver_status", msg_to_dict),
        )
        self._subscriptions = [node.create_subscription(cls, _name(namespace, topic), to_inbox(kind, convert), qos)
                               for cls, topic, qos, kind, convert in topics]
        self._types = {"takeover": Takeover, "resume": Resume, "discard": Discard,
                       "submit_score_sheet": SubmitScoreSheet, "clear_safety_stop": ClearSafetyStop}
        self._clients = {name: node.create_client(srv, _name(namespace, name)) for name, srv in self._types.items()}

    def ready(self, service: str) -> bool:
        """Whether the station's ``service`` is discovered (a call would reach it)."""
        return self._clients[service].service_is_ready()

    def call(self, service: str, **fields: Any) -> None:
        """Call an operator service without waiting; the reply (or why there is none) arrives on the inbox."""
        client = self._clients[service]
        if not client.service_is_ready():
            self.inbox.put(("reply", (service, False, f"{client.srv_name} is not available (is the station up?)")))
            return
        request = self._types[service].Request()
        for key, value in fields.items():
            setattr(request, key, value)
        future = client.call_async(request)

        def done(fut: Any) -> None:
            try:
                response = fut.result()
                self.inbox.put(("reply", (service, bool(response.ok), str(response.message))))
            except Exception as exc:  # the call failed in transport: say so instead of losing it
                self.inbox.put(("reply", (service, False, f"{type(exc).__name__}: {exc}")))

        future.add_done_callback(done)

    def destroy(self) -> None:
        for sub in self._subscriptions:
            self.node.destroy_subscription(sub)
        for client in self._clients.values():
            self.node.destroy_client(client)
        self._subscriptions, self._clients = [], {}


class MonitorWidget(QtWidgets.QWidget):
    """The station monitor. ``node`` is spun by the caller; ``namespace`` is the station's (``strands``)."""

    def __init__(self, node: Any, namespace: str = "strands", parent: Any = None,
                 operator_name: str = "operator") -> None:
        super().__init__(parent)
        self.setObjectName("StrandsMonitorWidget")
        self.setWindowTitle("strands_robots monitor")
        self.node = node
        self.model = MonitorModel()
        self.inbox: "queue.Queue[tuple[str, Any]]" = queue.Queue()
        self.link: "RosLink | None" = None
        self.camera_feed: "CameraFeed | None" = None
        self._rescanned_s = 0.0
        self._closed = False
        self._build(namespace, operator_name)
        self.set_namespace(namespace)
        self.timer = QtCore.QTimer(self)
        self.timer.timeout.connect(self.drain)
        self.timer.start(REFRESH_MS)

    # -- layout -----------------------------------------------------------------------------------------------
    def _build(self, namespace: str, operator_name: str) -> None:
        W = QtWidgets
        root = W.QVBoxLayout(self)
        top = W.QGridLayout()
        top.addWidget(W.QLabel("namespace"), 0, 0)
        self.namespace_edit = W.QLineEdit(namespace)
        self.namespace_edit.setMaximumWidth(160)
        self.namespace_edit.editingFinished.connect(self._namespace_edited)
        top.addWidget(self.namespace_edit, 0, 1)
        self.job_label, self.lease_label, self.driver_label = W.QLabel(), W.QLabel(), W.QLabel()
        for label in (self.job_label, self.lease_label, self.driver_label):
            label.setWordWrap(True)  # long job messages wrap instead of widening the window
            label.setSizePolicy(W.QSizePolicy.Ignored, W.QSizePolicy.Preferred)
        top.addWidget(self.job_label, 0, 2, 1, 2)
        top.addWidget(self.lease_label, 1, 2)
        top.addWidget(self.driver_label, 1, 3)
        top.setColumnStretch(2, 1)
        top.setColumnStretch(3, 1)
        root.addLayout(top)
        self.cameras_view = CameraThumbnails()
        root.addWidget(self.cameras_view)

        split = W.QSplitter(QtCore.Qt.Horizontal)
        self.steps_table = W.QTableWidget(0, len(STEP_COLUMNS))
        self.steps_table.setHorizontalHeaderLabels(list(STEP_COLUMNS))
        self.steps_table.verticalHeader().setVisible(False)
        header = self.steps_table.horizontalHeader()
        for column, width in enumerate((50, 80, 0, 70, 40, 60, 60, 60)):
            if width:
                self.steps_table.setColumnWidth(column, width)
        header.setSectionResizeMode(2, W.QHeaderView.Stretch)  # the unresolved keys and reasons
        self.steps_table.setEditTriggers(W.QAbstractItemView.NoEditTriggers)
        split.addWidget(self.steps_table)
        right = W.QWidget()
        right_layout = W.QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        self.summary_text = W.QPlainTextEdit()
        self.summary_text.setReadOnly(True)
        self.safety_text = W.QPlainTextEdit()
        self.safety_text.setReadOnly(True)
        self.safety_text.setMaximumHeight(110)
        self.episodes_table = W.QTableWidget(0, len(EPISODE_COLUMNS))
        self.episodes_table.setHorizontalHeaderLabels(list(EPISODE_COLUMNS))
        self.episodes_table.verticalHeader().setVisible(False)
        self.episodes_table.horizontalHeader().setStretchLastSection(True)
        self.episodes_table.setEditTriggers(W.QAbstractItemView.NoEditTriggers)
        right_layout.addWidget(W.QLabel("current run"))
        right_layout.addWidget(self.summary_text, 2)
        right_layout.addWidget(W.QLabel("safety"))
        right_layout.addWidget(self.safety_text)
        right_layout.addWidget(W.QLabel("episodes"))
        right_layout.addWidget(self.episodes_table, 2)
        split.addWidget(right)
        split.setSizes([560, 540])
        root.addWidget(split, 1)

        ops = W.QHBoxLayout()
        ops.addWidget(W.QLabel("operator"))
        self.operator_edit = W.QLineEdit(operator_name)
        self.operator_edit.setMaximumWidth(120)
        ops.addWidget(self.operator_edit)
        self.takeover_button = W.QPushButton("Take over")
        self.resume_button = W.QPushButton("Resume")
        ops.addWidget(self.takeover_button)
        ops.addWidget(self.resume_button)
        ops.addWidget(W.QLabel("episode"))
        self.episode_edit = W.QLineEdit()
        self.episode_edit.setPlaceholderText("ep_0000")
        self.episode_edit.setMaximumWidth(90)
        ops.addWidget(self.episode_edit)
        self.discard_button = W.QPushButton("Discard")
        ops.addWidget(self.discard_button)
        self.answers_edit = W.QLineEdit()
        self.answers_edit.setPlaceholderText("success=yes, cubes_stacked=3")
        ops.addWidget(self.answers_edit, 1)
        self.sheet_button = W.QPushButton("Submit score sheet")
        ops.addWidget(self.sheet_button)
        self.clear_safety_button = W.QPushButton("Clear safety stop")
        self.clear_safety_button.setToolTip("ask the station to clear the safety stop (you looked at the arms)")
        ops.addWidget(self.clear_safety_button)
        root.addLayout(ops)
        self.reply_label = W.QLabel("")
        root.addWidget(self.reply_label)

        for button, action in ((self.takeover_button, self.take_over), (self.resume_button, self.resume),
                               (self.discard_button, self.discard), (self.sheet_button, self.submit_score_sheet),
                               (self.clear_safety_button, self.clear_safety_stop)):
            button.clicked.connect(self._guarded(action))
        self.refresh()

    # -- ROS --------------------------------------------------------------------------------------------------
    def _namespace_edited(self) -> None:
        # Qt emits editingFinished when the field loses focus, also while the widget is being destroyed; an
        # exception escaping a slot aborts the process under PyQt5, so nothing here may raise.
        if not self._closed:
            self.set_namespace(self.namespace_edit.text())

    def set_namespace(self, namespace: str) -> None:
        """Watch another station: new subscriptions and clients, a fresh model."""
        if self._closed:
            return
        if self.link is not None and self.link.namespace == namespace:
            return
        if self.link is not None:
            self.link.destroy()
        while not self.inbox.empty():  # what the old station sent does not belong to the new one's model
            self.inbox.get_nowait()
        self.model = MonitorModel()
        self.link = RosLink(self.node, namespace, self.inbox)
        if self.camera_feed is not None:
            self.camera_feed.destroy()
        self.cameras_view.clear()
        self.camera_feed = CameraFeed(self.node, namespace)
        self._rescanned_s = 0.0
        self.namespace_edit.setText(namespace)

    def drain(self) -> int:
        """GUI thread: fold what arrived into the model and refresh; how many items were taken."""
        taken = 0
        while True:
            try:
                kind, payload = self.inbox.get_nowait()
            except queue.Empty:
                break
            taken += 1
            try:
                if kind == "event":
                    self.model.on_event(*payload)
                elif kind == "reply":
                    self.model.on_reply(*payload)
                else:
                    getattr(self.model, f"on_{kind}")(payload)
            except Exception as exc:  # a slot must not raise (PyQt5 aborts); show what could not be shown
                self.model.on_reply("monitor", False, f"could not show a {kind} message: {type(exc).__name__}: {exc}")
        if taken:
            try:
                self.refresh()
            except Exception as exc:  # a timer slot must not raise either
                self.reply_label.setText(f"monitor: could not refresh: {type(exc).__name__}: {exc}")
        self._show_cameras()
        return taken

    def _show_cameras(self) -> None:
        """GUI thread: look for new cameras now and then; show each camera's newest frame."""
        if self.camera_feed is None:
            return
        try:
            now = time.monotonic()
            if now - self._rescanned_s >= CAMERA_RESCAN_S:
                self._rescanned_s = now
                self.camera_feed.rescan()
            self.cameras_view.show_frames(self.camera_feed.latest(), now)
        except Exception as exc:  # a timer slot must not raise
            self.reply_label.setText(f"monitor: could not show the cameras: {type(exc).__name__}: {exc}")

    def refresh(self) -> None:
        m = self.model
        self.job_label.setText(m.job_text())
        self.lease_label.setText(m.lease_text())
        self.driver_label.setText(m.driver_text())
        self.summary_text.setPlainText("\n".join(m.summary_lines()))
        safety = m.safety_lines()
        self.safety_text.setPlainText("\n".join(safety))
        stopped = bool(m.safety and m.safety.get("stopped"))
        self.safety_text.setStyleSheet("QPlainTextEdit { color: #b00000; font-weight: bold; }" if stopped else "")
        wanted = m.safety_clear_wanted()
        self.clear_safety_button.setStyleSheet("QPushButton { color: #b00000; font-weight: bold; }" if wanted else "")
        self.clear_safety_button.setToolTip(wanted or "no safety stop waits for a clear")
        self._fill(self.steps_table, [r.cells() for r in reversed(m.step_rows()[-SHOWN_STEPS:])])
        self._fill(self.episodes_table, m.episode_rows())
        if m.replies:
            self.reply_label.setText(m.replies[-1])

    @staticmethod
    def _fill(table: Any, rows: list) -> None:
        table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = table.item(r, c)
                if item is None:
                    table.setItem(r, c, QtWidgets.QTableWidgetItem(text))
                elif item.text() != text:
                    item.setText(text)

    # -- operator actions -------------------------------------------------------------------------------------
    def _guarded(self, action: Callable[[], None]) -> Callable[..., None]:
        """Wrap an action as a slot that shows a failure instead of raising it (PyQt5 aborts on one)."""
        def slot(*_: Any) -> None:
            if self._closed or self.link is None:
                return
            try:
                action()
            except Exception as exc:
                self.model.on_reply(action.__name__, False, f"{type(exc).__name__}: {exc}")
                self.refresh()

        return slot

    def _operator(self) -> str:
        return self.operator_edit.text().strip() or "operator"

    def take_over(self) -> None:
        self.link.call("takeover", operator_name=self._operator(), reason="taken over from the monitor")

    def resume(self) -> None:
        self.link.call("resume", operator_name=self._operator())

    def clear_safety_stop(self) -> None:
        self.link.call("clear_safety_stop", operator_name=self._operator())

    def _episode_id(self, service: str) -> "str | None":
        episode = self.episode_edit.text().strip()
        if not episode:
            self.model.on_reply(service, False, "enter the episode id first")
            self.refresh()
            return None
        return episode

    def discard(self) -> None:
        episode = self._episode_id("discard")
        if episode is not None:
            self.link.call("discard", episode_id=episode)

    def submit_score_sheet(self) -> None:
        from strands_robots_msgs.msg import ScoredItem

        episode = self._episode_id("submit_score_sheet")
        if episode is None:
            return
        try:
            answers = parse_answers(self.answers_edit.text())
        except ValueError as exc:
            self.model.on_reply("submit_score_sheet", False, str(exc))
            self.refresh()
            return
        items = []
        for name, answer in answers:
            item = ScoredItem()
            item.name, item.answer = name, answer
            items.append(item)
        self.link.call("submit_score_sheet", episode_id=episode, answers=items)

    def shutdown(self) -> None:
        """Stop the timer and drop the subscriptions and clients (the node stays the caller's)."""
        self._closed = True
        self.timer.stop()
        self.namespace_edit.editingFinished.disconnect(self._namespace_edited)
        if self.camera_feed is not None:
            self.camera_feed.destroy()
        if self.link is not None:
            self.link.destroy()
            self.link = None
