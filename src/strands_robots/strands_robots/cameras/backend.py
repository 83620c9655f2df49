"""In process: a rollout backend whose observations hold each camera's latest frame beside the joint readings.

:class:`CameraBackend` wraps a :class:`~strands_robots.rollout.backend.RobotBackend` (the in-process driver core)
and a camera source (:mod:`strands_robots.cameras.adapter`). On ``observe()`` it takes the joint readings, poses
the source's mirror of the arms from them and renders each camera whose next frame is due at its fps, on the
robot's clock (``sim_time_s``): a 15 fps camera in a 50 Hz loop renders every third or fourth step, and the
steps between see its last frame with its age. A render that fails leaves the last frame in place (counted in
``render_failures``, the last error kept for the refusal's text). The frames enter the observation by the stale rule
(:mod:`strands_robots.cameras.frames`): a frame older than its bound raises :class:`CameraStale`, which ends the
episode as an error before the policy or the recording sees it, as a stale joint reading does.

While an episode records (the runner's ``start_recording``), each frame rendered also goes into its file as the
camera node would publish it (:mod:`strands_robots.cameras.episode_frames`).

``reset(seed)`` lays out the scene (:func:`~strands_robots.cameras.scene.object_position` of the task
parameters last given to :meth:`CameraBackend.set_task` and the episode's seed) and forgets the old frames.
Every other backend member (``fault_detail``, ``command_window``, ``core``, ...) is the wrapped backend's.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from strands_robots.cameras.adapter import CameraSource
from strands_robots.cameras.config import CameraSet
from strands_robots.cameras.episode_frames import frame_messages
from strands_robots.cameras.frames import CameraStale, LatestFrames
from strands_robots.cameras.scene import object_position

_NS = 1_000_000_000
_POS_SUFFIX = ".pos"

__all__ = ["CameraBackend", "CameraStale"]


class CameraBackend:
    """``inner`` with camera frames in its observations (see the module docstring).

    :param inner: the robot backend.
    :param source: the camera source; this backend closes it in :meth:`close`.
    :param cameras: the cameras to put in observations (each must be one the source delivers).
    """

    def __init__(self, inner: Any, source: CameraSource, cameras: CameraSet) -> None:
        self._inner = inner
        self._source = source
        self._cameras = cameras
        self.frames = LatestFrames(cameras.cameras)
        self._due_ns: dict[str, Optional[int]] = {c.name: None for c in cameras.cameras}
        self._task: "Mapping[str, Any] | None" = None
        self._seed: "Optional[int]" = None
        self.rendered = {c.name: 0 for c in cameras.cameras}
        self._recorder: Any = None  # the episode's recorder while it records (start_recording)
        self.render_failures = {c.name: 0 for c in cameras.cameras}
        self.last_failure = {c.name: "" for c in cameras.cameras}

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def source(self) -> CameraSource:
        return self._source

    @property
    def cameras(self) -> CameraSet:
        return self._cameras

    @property
    def camera_names(self) -> tuple[str, ...]:
        """The cameras every observation holds (the runner puts their stamps and ages in the step events)."""
        return self._cameras.names

    def __getattr__(self, name: str) -> Any:  # everything not camera-related is the wrapped backend's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def set_task(self, task: "Optional[Mapping[str, Any]]") -> None:
        """Remember the task whose parameters lay out the scene at the next ``reset``.

        :raises SceneParameterError: the task places the object outside the region (nothing is remembered).
        """
        task = dict(task) if isinstance(task, Mapping) else None
        object_position(task, None)  # the same check reset's layout makes, before anything moves
        self._task = task

    def action_keys(self) -> tuple[str, ...]:
        return self._inner.action_keys()

    def send_action(self, action: Mapping[str, float]) -> Any:
        return self._inner.send_action(action)

    def advance(self, dt: float) -> None:
        self._inner.advance(dt)

    def safety_stop_detail(self) -> str:
        return self._inner.safety_stop_detail()

    def start_recording(self, recorder: Any) -> None:
        """Write every frame rendered from now on into the episode's ``recorder`` (JPEG and camera info)."""
        self._recorder = recorder

    def stop_recording(self) -> None:
        self._recorder = None

    def _record(self, cam: Any, image: Any, stamp_ns: int) -> None:
        log_ns = time.time_ns()
        for topic, type_name, message in frame_messages(self._recorder.topic_prefix, cam.name, image,
                                                        self._source.intrinsics(cam.name), stamp_ns,
                                                        cam.jpeg_quality):
            self._recorder.write_message(topic, type_name, message, log_ns, self.rendered[cam.name] - 1)

    def reset(self, seed: "int | None" = None) -> None:
        self._inner.reset(seed)
        self._seed = seed
        self._source.set_scene(self._task, seed)
        self.frames.clear()
        self._due_ns = {name: None for name in self._due_ns}

    def observe(self) -> dict[str, Any]:
        """Return the joint readings with every camera's frame (``<camera>.image``), its age and stamp.

        :raises CameraStale: a camera's frame is older than its bound.
        """
        obs = self._inner.observe()
        now_ns = int(round(float(obs.get("sim_time_s", 0.0)) * _NS))
        due = [c for c in self._cameras.cameras if self._due_ns[c.name] is None or now_ns >= self._due_ns[c.name]]
        if due:
            self._source.pose({k[: -len(_POS_SUFFIX)]: v for k, v in obs.items()
                               if isinstance(k, str) and k.endswith(_POS_SUFFIX)})
            for c in due:
                try:
                    image = self._source.render(c.name)
                except Exception as exc:  # no new frame: the last one ages, and the stale rule decides
                    self.render_failures[c.name] += 1
                    self.last_failure[c.name] = f"{type(exc).__name__}: {exc}"[:200]
                    image = None
                if image is not None:
                    self.frames.put(c.name, image, now_ns)
                    self.rendered[c.name] += 1
                    if self._recorder is not None:  # a failed write raises: the episode ends as an error
                        self._record(c, image, now_ns)
                # The next frame is due one period after this one's slot, not after now, so the rate holds
                # when steps do not fall on frame times; one that fell behind starts a new slot.
                period_ns = int(round(c.period_s * _NS))
                slot = self._due_ns[c.name]
                nxt = now_ns + period_ns if slot is None else slot + period_ns
                self._due_ns[c.name] = nxt if nxt > now_ns else now_ns + period_ns
        try:
            self.frames.add_to(obs, now_ns)
        except CameraStale as exc:
            failures = "; ".join(f"camera {n}: {self.render_failures[n]} failed renders, last {t}"
                                 for n, t in self.last_failure.items() if t)
            raise CameraStale(f"{exc}; {failures}" if failures else str(exc)) from None
        return obs

    def close(self) -> None:
        self._source.close()


class FramesBackend:
    """``inner`` with the frames others deliver (the camera node's topics, over ROS) in its observations.

    The frames arrive in ``frames`` from elsewhere (a subscription's callback puts each one with its stamp);
    ``clock_ns`` is the clock the stamps are on (the rollout node's clock: the camera node stamps with the same
    kind). On ``observe()`` every camera's latest frame enters the observation by the stale rule
    (:mod:`strands_robots.cameras.frames`); ``reset()`` (before the episode's clock starts) and an observation
    before a camera's first frame wait for it at most ``first_frame_timeout_s``, then refuse
    (:class:`CameraStale`), as the first joint state is waited for.
    Every other member is the wrapped backend's.

    With ``set_scene`` (a simulated camera node), ``reset(seed)`` lays out the scene for the task given to
    :meth:`set_task` and the seed: ``set_scene(task, seed)`` returns once the camera node has taken it, at a time
    on the frames' clock; frames stamped before it (the old layout) are discarded, so the episode's first
    observation waits for a frame of the new one.

    :param inner: the robot backend.
    :param frames: the latest frames of the cameras every observation must hold.
    :param clock_ns: now, on the frames' clock (ns).
    :param first_frame_timeout_s: how long the first observation waits for every camera's first frame.
    :param set_scene: ``(task, seed) -> stamp_ns``; raises when the scene could not be laid out.
    :param recording: where the cameras' messages come from for an episode's recording (``attach(recorder)`` /
        ``detach()``): the runner calls :meth:`start_recording` once the episode's file is open.
    """

    def __init__(self, inner: Any, frames: LatestFrames, clock_ns: Any, first_frame_timeout_s: float = 10.0,
                 set_scene: Any = None, recording: Any = None) -> None:
        self._recording = recording
        self._inner = inner
        self.frames = frames
        self._clock_ns = clock_ns
        self._first_timeout_s = float(first_frame_timeout_s)
        self._set_scene = set_scene
        self._task: "Mapping[str, Any] | None" = None

    def set_task(self, task: "Optional[Mapping[str, Any]]") -> None:
        """Remember the task whose parameters lay out the scene at the next ``reset`` (with ``set_scene``).

        :raises SceneParameterError: the task places the object outside the region (nothing is remembered).
        """
        task = dict(task) if isinstance(task, Mapping) else None
        object_position(task, None)
        self._task = task

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def camera_names(self) -> tuple[str, ...]:
        """The cameras every observation holds (the runner puts their stamps and ages in the step events)."""
        return tuple(c.name for c in self.frames.cameras)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def start_recording(self, recorder: Any) -> None:
        """Record the cameras' messages into the episode's ``recorder`` (``write_raw``) until :meth:`stop_recording`."""
        if self._recording is not None:
            self._recording.attach(recorder)

    def stop_recording(self) -> None:
        if self._recording is not None:
            self._recording.detach()

    def action_keys(self) -> tuple[str, ...]:
        return self._inner.action_keys()

    def send_action(self, action: Mapping[str, float]) -> Any:
        return self._inner.send_action(action)

    def advance(self, dt: float) -> None:
        self._inner.advance(dt)

    def safety_stop_detail(self) -> str:
        return self._inner.safety_stop_detail()

    def reset(self, seed: "int | None" = None) -> None:
        """Reset the robot (and lay out the scene); return once every camera has a frame (of the new layout).

        The wait is here, before the episode's clock starts, not in its first observation.

        :raises CameraStale: a camera sent no frame within the first-frame timeout.
        """
        self._inner.reset(seed)
        if self._set_scene is not None:
            self.frames.discard_before(int(self._set_scene(self._task, seed)))
        if not self.frames.wait_all(self._first_timeout_s):
            missing = [c.name for c in self.frames.cameras if self.frames.get(c.name) is None]
            raise CameraStale(f"camera {', '.join(missing)} stale: no frame within {self._first_timeout_s:g} s of the "
                              "episode's reset")

    def observe(self) -> dict[str, Any]:
        """Return the inner observation with every camera's latest frame, its age and stamp.

        :raises CameraStale: a camera sent no frame within the first-frame timeout, or its latest is too old.
        """
        obs = self._inner.observe()
        self.frames.wait_all(self._first_timeout_s)  # at once when every camera has a frame
        self.frames.add_to(obs, int(self._clock_ns()))
        return obs
