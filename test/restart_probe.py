"""A peer that outlives every restart: how long until a SIGKILLed and restarted process is heard again.

The station's processes run as in ``strands-robots up`` (``crash_harness.CrashStation`` with the demo's cameras,
its relay, and one job left waiting for its policy so the station keeps reporting it). :class:`RestartProbe` is a
ROS node of the test (or bench) process that talks to each node process before and after its restart, as the
other processes do, so it holds whatever a peer keeps about a process that died:

- **both ways**: the node's own parameter service (``<ns>/<node>/get_parameters``, which every rclpy node
  serves) answers the probe: the request travelled peer -> restarted process, the answer restarted -> peer;
- **restarted -> peer**: the node's periodic topic reaches the probe (the arm driver's ``joint_states``, the
  camera's ``scene/camera_info``, the station's ``/diagnostics``; the rollout node publishes only during
  episodes: its service answer is its figure);
- **up**: the node's process has made its DDS participant (its Fast DDS data segment is mapped): what the
  process's own start-up (Python's imports, ``rclpy.init``) took, before any peer could hear it;
- **the relay** (gRPC, no DDS): a team's ``get_status`` answered, and the station heard by the relay again
  (``station_last_heard_unix_ms`` past the restart; the station reports every ``heartbeat_s``, 2 s).

:func:`measure_restart` SIGKILLs one process, starts it again after ``pause_s`` and returns the seconds from the
restart (the new process's exec) to each first. ``test/test_restart_reconnect.py`` holds them to a generous bound;
``bench/restart_reconnect.py`` prints the figures.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Dict, Optional

from crash_harness import crash_station

NODES = ("arm_driver", "camera", "rollout", "station")
TARGETS = ("relay",) + NODES
CAMERAS = "scene,wrist"
WAITING_JOB_TASKS = [{"task_id": "idle", "instruction": "wait for a policy that never comes", "layout": "table",
                      "parameters": {"duration_s": "1", "control_frequency": "50"},
                      "scoring": [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1,
                                   "success_answer": "yes"}]}]


def participant_up(pid: int) -> bool:
    """Tell whether process ``pid`` has made its DDS participant (Fast DDS has mapped its data segment by then)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
            return any(("/dev/shm/fastdds_" in line or "/dev/shm/fastrtps_" in line) and "_port" not in line
                       for line in maps)
    except OSError:
        return False


class RestartProbe:
    """The probe node (see the module docstring), spun on its own thread in its own context."""

    def __init__(self, namespace: str, station_id: str) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rcl_interfaces.srv import GetParameters
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CameraInfo, JointState

        from strands_robots.ros.qos import DIAGNOSTICS_QOS, STATE_QOS

        self._rclpy = rclpy
        self._request = GetParameters.Request
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("restart_probe", namespace=f"/{namespace}", context=self.context)
        self.clients = {name: self.node.create_client(GetParameters, f"/{namespace}/{name}/get_parameters")
                        for name in NODES}
        self._lock = threading.Lock()
        self.last_heard: Dict[str, float] = {}  # node -> monotonic time of its newest periodic message
        self.node.create_subscription(JointState, "joint_states", lambda _m: self._heard("arm_driver"), STATE_QOS)
        self.node.create_subscription(CameraInfo, "scene/camera_info", lambda _m: self._heard("camera"),
                                      qos_profile_sensor_data)
        station_status = "station: jobs"

        def on_diagnostics(msg) -> None:
            if any(s.name == station_status and s.hardware_id == station_id for s in msg.status):
                self._heard("station")

        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, DIAGNOSTICS_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True, name="restart-probe")
        self.thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except Exception:  # noqa: BLE001  (shut down under it)
                return

    def _heard(self, name: str) -> None:
        with self._lock:
            self.last_heard[name] = time.monotonic()

    def heard_since(self, name: str, since: float) -> bool:
        with self._lock:
            return self.last_heard.get(name, 0.0) > since

    def ask(self, name: str, timeout_s: float = 0.5) -> bool:
        """Ask ``name``'s parameter service once; True when it answered within ``timeout_s``."""
        client = self.clients[name]
        if not client.service_is_ready():
            return False
        done = threading.Event()
        future = client.call_async(self._request(names=["use_sim_time"]))
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            client.remove_pending_request(future)
            return False
        return future.exception() is None and future.result() is not None

    def close(self) -> None:
        self._rclpy.try_shutdown(context=self.context)
        self.thread.join(5.0)
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()


class ProbedStation:
    """The station's processes, a waiting job and the probe; :meth:`close` ends every process by PID."""

    def __init__(self, workdir: str, namespace: str) -> None:
        self.stack = crash_station(workdir, namespace=namespace, cameras=CAMERAS,
                                   station_params={"policy_attach_timeout_s": "3600.0"})
        self.probe: Optional[RestartProbe] = None
        self.client = None
        self.job_id = ""
        try:
            self.stack.start_relay()
            self.stack.start_nodes()
            self.probe = RestartProbe(namespace, self.stack.station_id)
            self.client = self.stack.client()
            self.job_id = self.client.submit_job(station_id=self.stack.station_id, tasks=WAITING_JOB_TASKS,
                                                 episodes=1)
        except BaseException:
            self.close()
            raise

    def wait_all_heard(self, timeout_s: float) -> Dict[str, Optional[float]]:
        """Wait until every node answers and every periodic topic comes, and the relay has the station's report."""
        return self._wait_after(time.monotonic() - 3600.0, TARGETS, timeout_s)

    def _relay_heard_station_since(self, since_unix_ms: int) -> bool:
        from strands_robots.client import RelayError

        client = self.stack.client()
        try:
            status = client.get_status(self.job_id)
        except RelayError:
            return False
        finally:
            client.close()
        return status.HasField("station_last_heard_unix_ms") and status.station_last_heard_unix_ms > since_unix_ms

    def _relay_answers(self) -> bool:
        from strands_robots.client import RelayError

        client = self.stack.client()
        try:
            client.get_status(self.job_id)
        except RelayError:
            return False
        finally:
            client.close()
        return True

    def _wait_after(self, since: float, names, timeout_s: float,
                    since_unix_ms: int = 0) -> Dict[str, Optional[float]]:
        """Return the seconds after ``since`` (monotonic) at which each figure of ``names`` first held.

        A figure that did not hold within ``timeout_s`` is None.
        """
        firsts: Dict[str, Optional[float]] = {}
        wanted = []
        for name in names:
            if name == "relay":
                wanted += ["relay answers", "relay hears station"]
            else:
                wanted += [f"{name} up", f"{name} answers"]
                if name != "rollout":
                    wanted.append(f"{name} heard")
        deadline = time.monotonic() + timeout_s

        def check(key: str) -> bool:
            name, what = key.split(" ", 1)
            if name == "relay":
                return self._relay_answers() if what == "answers" else self._relay_heard_station_since(since_unix_ms)
            if what == "up":
                return participant_up(self.stack.proc(name).pid)
            if what == "answers":
                return self.probe.ask(name)
            return self.probe.heard_since(name, since)

        def watch(key: str) -> None:  # each figure on its own thread: an unanswered ask never delays another
            while time.monotonic() < deadline:
                if check(key):
                    firsts[key] = time.monotonic() - since
                    return
                time.sleep(0.02)

        threads = [threading.Thread(target=watch, args=(key,), daemon=True, name=f"probe {key}") for key in wanted]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 5.0)
        return {key: firsts.get(key) for key in wanted}

    def measure_restart(self, target: str, pause_s: float, timeout_s: float) -> Dict[str, Optional[float]]:
        """SIGKILL ``target`` and start it again after ``pause_s``; return the seconds from the restart to each first.

        A figure that did not hold within ``timeout_s`` is None.
        """
        self.stack.kill(target, signal.SIGKILL)
        time.sleep(pause_s)
        restarted_unix_ms = int(time.time() * 1000)
        restarted = time.monotonic()
        self.stack.restart(target)
        return self._wait_after(restarted, (target,), timeout_s, since_unix_ms=restarted_unix_ms)

    def close(self) -> None:
        try:
            if self.probe is not None:
                self.probe.close()
        finally:
            self.stack.stop()  # every process ever started, by PID
