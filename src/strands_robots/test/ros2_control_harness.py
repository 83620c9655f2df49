"""A real ros2_control stack for the tests: the controller_manager with mock hardware, its spawners, the URDF.

ros2_control is not on PyPI. The tests run where it is: a sourced distro or workspace that has
``controller_manager`` (importable, ``ros2_control_node`` under its prefix), or a file named by
``STRANDS_ROBOTS_ROS2_CONTROL_ENV`` that sets one up when sourced by bash (a workspace built over the wheels).
Elsewhere :func:`ros2_control_env` gives the reason to skip.

:class:`ControllerManager` runs ``ros2_control_node`` on this package's demo description
(``config/ros2_control/two_arms.urdf``, ``mock_components/GenericSystem``) and controllers file, as its own
process, ended by PID; :class:`RobotDescription` latches the URDF on ``/robot_description`` as
robot_state_publisher would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

ENV_FILE_VARIABLE = "STRANDS_ROBOTS_ROS2_CONTROL_ENV"
_PACKAGE = Path(__file__).resolve().parent.parent
URDF = _PACKAGE / "config" / "ros2_control" / "two_arms.urdf"
CONTROLLERS = _PACKAGE / "config" / "ros2_control" / "controllers.yaml"
ARMS = _PACKAGE / "config" / "ros2_control" / "arms.yaml"
_PATH_LISTS = ("PATH", "PYTHONPATH", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH", "COLCON_PREFIX_PATH")
# Set by the sourced file but decided by the test run.
_KEEP = ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY", "FASTDDS_DEFAULT_PROFILES_FILE",
         "FASTRTPS_DEFAULT_PROFILES_FILE")


def _merge(base: dict, sourced: dict) -> dict:
    """Return this run's environment plus what the sourced file adds: its path entries after ours (ours win)."""
    env = dict(base)
    for name, value in sourced.items():
        if name in _KEEP:
            continue
        if name in _PATH_LISTS:
            ours = [p for p in base.get(name, "").split(os.pathsep) if p]
            extra = [p for p in value.split(os.pathsep) if p and p not in ours]
            env[name] = os.pathsep.join(ours + extra)
        elif name not in base:
            env[name] = value
    if "LD_PRELOAD" in sourced:
        env["LD_PRELOAD"] = sourced["LD_PRELOAD"]
    return env


def _node_executable(env: dict) -> Optional[str]:
    for prefix in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        exe = Path(prefix) / "lib" / "controller_manager" / "ros2_control_node"
        if prefix and exe.is_file():
            return str(exe)
    return None


_CACHED: Optional[tuple] = None


def ros2_control_env() -> tuple[Optional[dict], str]:
    """(environment for the ros2_control processes and the driver, "") or (None, why the tests skip)."""
    global _CACHED
    if _CACHED is not None:
        return _CACHED
    env_file = os.environ.get(ENV_FILE_VARIABLE, "")
    base = dict(os.environ)
    if env_file:
        if not os.path.isfile(env_file):
            _CACHED = (None, f"{ENV_FILE_VARIABLE}={env_file!r} is not a file")
            return _CACHED
        out = subprocess.run(["bash", "-c", f'source "{env_file}" >/dev/null 2>&1 && env -0'], capture_output=True,
                             timeout=60, env=base)
        if out.returncode != 0:
            _CACHED = (None, f"sourcing {env_file} failed: {out.stderr.decode(errors='replace')[-300:]}")
            return _CACHED
        sourced = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
        env = _merge(base, sourced)
    else:
        env = base
    exe = _node_executable(env)
    if exe is None:
        _CACHED = (None, "ros2_control is not here: no controller_manager/ros2_control_node under AMENT_PREFIX_PATH "
                         f"(source a distro or workspace with ros2_control, or set {ENV_FILE_VARIABLE} to a file "
                         "that does)")
        return _CACHED
    probe = subprocess.run([_python(), "-c",
                            "import controller_manager_msgs.srv, trajectory_msgs.msg"],
                           env=env, capture_output=True, timeout=60)
    if probe.returncode != 0:
        _CACHED = (None, "controller_manager_msgs / trajectory_msgs are not importable: "
                         + probe.stderr.decode(errors="replace")[-300:])
        return _CACHED
    env["PYTHONUNBUFFERED"] = "1"
    _CACHED = (env, "")
    return _CACHED


def _python() -> str:
    import sys

    return sys.executable


class RobotDescription:
    """The URDF latched on ``/robot_description`` (std_msgs/String, reliable + transient local), from this process."""

    def __init__(self, context, urdf: Path = URDF) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        self.node = rclpy.create_node("strands_test_robot_description", context=context)
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub = self.node.create_publisher(String, "/robot_description", qos)
        self.pub.publish(String(data=urdf.read_text()))
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except Exception:
                return

    def close(self) -> None:
        self._stop.set()
        self.thread.join(2.0)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


def controllers_at(rate: int, tmp: Path) -> Path:
    """Write the demo controllers file with the controller_manager at ``rate`` Hz into ``tmp``; its path.

    The broadcaster keeps its own rate (a controller faster than the controller_manager runs at its rate).
    """
    lines = CONTROLLERS.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("update_rate:")
              and lines[i - 1].strip() == "ros__parameters:" and lines[i - 2].strip() == "controller_manager:")
    lines[at] = f"    update_rate: {rate}  # Hz"
    path = Path(tmp) / f"controllers_{rate}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def hold_before_switch(window: list, hold: float, update_period_s: float, since_ns: int) -> Optional[bool]:
    """Whether the hold reached the hardware before the switch, judged from a joint's position commands.

    ``window``: ``(stamp_ns, command)`` snapshots from the controller_manager's introspection data, from the stop
    (``since_ns``) on, of a joint that was moving up (toward larger values) when the stop came. Until the hold lands
    the command only moves up; once the active controller applies the hold (below it) the command equals it or comes
    back down toward it (the joint limits move it a step per update). So: True when the final command equals the
    hold or any snapshot moved down; False when the command only ever moved up and the snapshots are contiguous up
    to its final value, from the stop on; None when snapshots are missing there (best-effort data a loaded host
    dropped), so a move down may not have been seen.
    """
    if not window:
        return None
    values = [c for _, c in window]
    if abs(values[-1] - hold) < 1e-9 or any(b < a - 1e-9 for a, b in zip(values, values[1:])):
        return True
    final = next(i for i in range(len(values))
                 if all(abs(v - values[-1]) < 1e-9 for v in values[i:]))
    stamps = [since_ns] + [t for t, _ in window[:final + 1]]
    gaps = [(b - a) / 1e9 for a, b in zip(stamps, stamps[1:])]
    return False if all(g <= 1.5 * update_period_s for g in gaps) else None


class ControllerManager:
    """``ros2_control_node`` with the demo controllers, as its own process; ``spawn`` loads and activates."""

    def __init__(self, env: dict, log_dir: Path, controllers: Path = CONTROLLERS) -> None:
        self.env = env
        self.log_dir = Path(log_dir)
        self.controllers = controllers
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self._others: list = []

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"ros2_control_node_{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        exe = _node_executable(self.env)
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen([exe, "--ros-args", "--params-file", str(self.controllers)], env=self.env,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def spawn(self, *controllers: str, inactive: bool = False, timeout_s: float = 90.0) -> str:
        """Run the spawner (load, configure, activate unless ``inactive``); returns its output."""
        exe = Path(_node_executable(self.env)).parent / "spawner"
        args = [str(exe), *controllers, "-c", "/controller_manager", "--controller-manager-timeout", "60"]
        if inactive:
            args.append("--inactive")
        proc = subprocess.Popen(args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        self._others.append(proc)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _end(proc)
            raise AssertionError(f"spawner {controllers} did not finish in {timeout_s:g} s")
        if proc.returncode != 0 and not inactive and self._activated_meanwhile(controllers):
            return out
        if proc.returncode != 0 and not inactive and all(f"Configured and activated \x1b[1m{c}" in out or
                                                           f"Configured and activated {c}" in out
                                                           for c in controllers):
            return out  # every controller is active: the spawner failed only on its way out (a loaded host)
        assert proc.returncode == 0, f"spawner {controllers} failed:\n{out}\n{self.output()}"
        return out

    def _activated_meanwhile(self, controllers: tuple) -> bool:
        """Whether the spawner failed only because another caller activated its controllers first.

        A driver with a latched stop re-activates its command controller on an operator's clear, and that can land
        between the spawner's configure and its own (strict) activation: the spawner then fails on "already
        active", and the controller is active all the same.
        """
        log = self.output()
        return "Aborting, no controller is switched! (::STRICT switch)" in log and all(
            f"Controller with name '{c}' is already active." in log or c == "joint_state_broadcaster"
            for c in controllers)

    def output(self) -> str:
        try:
            return self.log_path.read_text()[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, as a crash would end it."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10.0)

    def stop(self) -> None:
        for p in self._others:
            _end(p)
        if self.proc is not None:
            _end(self.proc)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(5.0)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5.0)


def wait_until(predicate, timeout_s: float, period_s: float = 0.01) -> float:
    """Seconds until ``predicate`` held (raises AssertionError at the deadline)."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"not within {timeout_s:g} s")
        time.sleep(period_s)
    return time.monotonic() - t0
