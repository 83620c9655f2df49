"""The in-process simulation of the spec: named robots (MuJoCo two-arm drivers) and ``run_policy``.

::

    from strands_robots.simulation import Simulation
    sim = Simulation()
    sim.add_robot("alice")
    sim.run_policy(robot_name="alice", policy_provider="mock", observer=watch)

``run_policy`` takes the peer's keyword arguments with the same meaning and returns the rollout result
(:meth:`strands_robots.rollout.runner.PolicyRunner.run`). The simulation is reset before every episode, the
first included. Nothing here imports rclpy.
"""

from __future__ import annotations

import threading
from typing import Any

from strands_robots.rollout.runner import PolicyRunner
from strands_robots.rollout.stop import StopToken

__all__ = ["Simulation", "SimRobot"]


class SimRobot:
    """One named robot of a :class:`Simulation`: its backend, runner and stop token."""

    def __init__(self, name: str, backend: Any) -> None:
        self.name = name
        self.backend = backend
        self.stop_token = StopToken()
        self.runner = PolicyRunner(backend, robot_name=name, stop=self.stop_token)
        self.lock = threading.Lock()  # one rollout per robot at a time

    @property
    def core(self) -> Any:
        """The driver core (in-process backends)."""
        return getattr(self.backend, "core", None)


class Simulation:
    """Named simulated robots.

    Each is a MuJoCo two-arm :class:`~strands_robots.arm.driver.DriverCore` driven through
    :class:`~strands_robots.arm.backend.InProcessBackend`.
    """

    def __init__(self) -> None:
        self._robots: dict = {}
        self._lock = threading.Lock()

    @classmethod
    def with_robot(cls, name: str = "alice", **kwargs: Any) -> "Simulation":
        """Return a simulation holding one robot ``name`` (see :meth:`add_robot` for ``kwargs``)."""
        sim = cls()
        sim.add_robot(name, **kwargs)
        return sim

    def add_robot(self, name: str, *, backend: Any = None, config: Any = None,
                  model_path: "str | None" = None, cameras: Any = None) -> SimRobot:
        """Add a robot.

        :param name: unique robot name (``run_policy(robot_name=name)``).
        :param backend: a ready :class:`~strands_robots.rollout.backend.RobotBackend` (tests, hardware);
            default: a simulated MuJoCo driver core in process.
        :param config: a :class:`~strands_robots.arm.config.DriverConfig` for the simulated core.
        :param model_path: an MJCF replacing the bundled model.
        :param cameras: camera frames in every observation (``<camera>.image``, :mod:`strands_robots.cameras`):
            a :class:`~strands_robots.cameras.config.CameraSet`, a camera file's path, or True for
            ``config/cameras.yaml``; None: joint readings only.
        :raises ValueError: the name is empty or taken.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"robot name must be a non-empty string, got {name!r}")
        with self._lock:
            if name in self._robots:
                raise ValueError(f"robot {name!r} already exists")
        if backend is None:
            from strands_robots.arm.backend import InProcessBackend
            from strands_robots.arm.driver import DriverCore

            backend = InProcessBackend(DriverCore.simulated(config, model_path=model_path))
        if cameras is not None and cameras is not False:
            from strands_robots.cameras.adapter import load as load_cameras
            from strands_robots.cameras.backend import CameraBackend
            from strands_robots.cameras.config import CameraSet, load_camera_set

            camera_set = cameras if isinstance(cameras, CameraSet) else load_camera_set(
                None if cameras is True else str(cameras))
            backend = CameraBackend(backend, load_cameras(camera_set, model_path), camera_set)
        robot = SimRobot(name, backend)
        with self._lock:
            if name in self._robots:
                raise ValueError(f"robot {name!r} already exists")
            self._robots[name] = robot
        return robot

    def remove_robot(self, name: str) -> None:
        """Remove a robot (strands-robots' Simulation has it too); an unknown name is no error."""
        with self._lock:
            self._robots.pop(name, None)

    def robot(self, name: str) -> SimRobot:
        with self._lock:
            robot = self._robots.get(name)
            known = sorted(self._robots)
        if robot is None:
            raise KeyError(f"no robot named {name!r}; robots: {', '.join(known) or '(none)'}")
        return robot

    def stop(self, robot_name: "str | None" = None, reason: str = "cancelled") -> None:
        """Cooperatively stop the rollout of ``robot_name`` (every robot when None) within one period."""
        with self._lock:
            robots = list(self._robots.values()) if robot_name is None else [self._robots[robot_name]]
        for robot in robots:
            robot.stop_token.request(reason)

    def run_policy(
        self,
        robot_name: str,
        policy_provider: Any = "mock",
        *,
        stop_when: Any = None,
        observer: Any = None,
        on_frame: Any = None,
        **kwargs: Any,
    ) -> dict:
        """Run a policy on one robot; the peer's keyword arguments, same meaning.

        ``policy_config``, ``instruction``, ``duration`` (s, default 10), ``control_frequency`` (50 Hz),
        ``action_horizon`` (8), ``fast_mode``, ``n_steps`` / ``max_steps`` (the step budget),
        ``max_onframe_failures``, ``seed``, ``n_episodes``, ``reset_between``, ``async_rtc``,
        ``rtc_inference_timeout_s``, ``record``, ``recording_dir``, ``fps``, ``task``: see
        :func:`~strands_robots.rollout.run_spec.validate_run` and :meth:`PolicyRunner.run`. ``observer`` is a
        callable or a list of them receiving ``RunPolicyStarted`` / ``RunPolicyStep`` / ``RunPolicyEnded``.
        An unknown robot is refused like any other preflight failure (``{"status": "error", ...}``, no events).
        """
        def refused(error_type: str, message: str) -> dict:
            out = {"status": "error", "episodes": [], "error_type": error_type, "error_message": message}
            if observer is not None:
                out["observer_failures"] = 0
            return out

        try:
            robot = self.robot(robot_name)
        except KeyError as exc:
            return refused("ValueError", exc.args[0])
        if not robot.lock.acquire(blocking=False):
            return refused("RuntimeError", f"robot {robot_name!r} is already running a policy")
        try:
            set_task = getattr(robot.backend, "set_task", None)
            if callable(set_task):  # cameras: the task's parameters lay out the scene at each episode's reset
                try:
                    set_task(kwargs.get("task"))
                except ValueError as exc:  # the object placed outside its region: refused before anything moves
                    return refused(type(exc).__name__, str(exc))
            return robot.runner.run(policy_provider, stop_when=stop_when, observer=observer, on_frame=on_frame,
                                    **kwargs)
        finally:
            robot.stop_token.clear()  # a stop applies to the call it was asked during (or before)
            robot.lock.release()
