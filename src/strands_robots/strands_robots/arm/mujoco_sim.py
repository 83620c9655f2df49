"""The two arms simulated in MuJoCo, behind the :class:`~strands_robots.arm.adapter.HardwareAdapter` API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import mujoco
import numpy as np

from strands_robots.arm.adapter import JointReadings
from strands_robots.arm.model import ARM_NAMES, JOINT_NAMES, actuator_key, load_model

if TYPE_CHECKING:
    from strands_robots.arm.config import DriverConfig
    from strands_robots.arm.hardware import Hardware


def make_arms(config: "DriverConfig", model_path: "str | None" = None) -> "MujocoArms":
    """Build the simulated arms for ``config`` (home pose, reset noise); its timestep must be the model's.

    :raises ConfigError: ``physics.timestep_s`` differs from the MJCF's timestep.
    """
    from strands_robots.arm.config import ConfigError

    arms = MujocoArms(model_path, home=config.home, reset_noise_rad=config.reset_noise_rad)
    if abs(arms.timestep_s - config.timestep_s) > 1e-12:
        raise ConfigError(
            f"physics.timestep_s ({config.timestep_s}) differs from the model's timestep ({arms.timestep_s})"
        )
    return arms


def hardware(config: "DriverConfig") -> "Hardware":
    """Build the built-in ``mujoco`` hardware binding.

    The simulated arms, stepped in real time by the simulator's own physics thread
    (:class:`~strands_robots.arm.realtime.RealTimeStepper` at the model's timestep).
    """
    from strands_robots.arm.hardware import Hardware
    from strands_robots.arm.realtime import RealTimeStepper

    arms = make_arms(config)

    def physics_thread(core, on_tick, on_fault):
        return RealTimeStepper(core, arms.timestep_s, arms.time_s, on_tick, on_fault, name="mujoco_physics")

    return Hardware("mujoco", arms, physics_thread)


class MujocoArms:
    """Two position-controlled arms in MuJoCo (implements ``HardwareAdapter``).

    Efforts are the joint torques the actuators apply (``qfrc_actuator``: servo effort plus gravity
    feed-forward), i.e. what a real servo reports. The hot path (``step``) is one ``mj_step`` call with
    ``nstep``; reads slice preallocated index arrays.

    :param model_path: MJCF to load (default: the bundled two-arm model).
    :param home: joint positions after ``reset`` by actuator key (missing keys: 0.0, arms upright).
    :param reset_noise_rad: uniform noise added to the home pose on ``reset(seed)`` (0 = deterministic).
    """

    def __init__(
        self,
        model_path: str | None = None,
        home: Mapping[str, float] | None = None,
        reset_noise_rad: float = 0.0,
    ) -> None:
        self._model = load_model(model_path)
        self._data = mujoco.MjData(self._model)
        self._arms = ARM_NAMES
        self._joints = {arm: JOINT_NAMES for arm in ARM_NAMES}
        self._keys = tuple(actuator_key(a, j) for a in ARM_NAMES for j in JOINT_NAMES)
        m = self._model
        qadr, dadr, act_ids, actadr = [], [], [], []
        for key in self._keys:
            name = key.replace(".", "/")
            jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
            aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
            if jid < 0 or aid < 0:
                raise ValueError(f"MJCF lacks joint or actuator {name!r}")
            qadr.append(int(m.jnt_qposadr[jid]))
            dadr.append(int(m.jnt_dofadr[jid]))
            act_ids.append(aid)
            actadr.append(int(m.actuator_actadr[aid]))
        self._qadr = np.asarray(qadr, dtype=np.intp)
        self._dadr = np.asarray(dadr, dtype=np.intp)
        self._act = np.asarray(act_ids, dtype=np.intp)
        self._actadr = np.asarray(actadr, dtype=np.intp)
        self._ctrl_index = {key: int(aid) for key, aid in zip(self._keys, act_ids)}
        self._arm_slots = {
            arm: np.asarray([i for i, k in enumerate(self._keys) if k.startswith(arm + ".")], dtype=np.intp)
            for arm in ARM_NAMES
        }
        self._home = np.zeros(len(self._keys))
        for key, value in (home or {}).items():
            if key not in self._ctrl_index:
                raise ValueError(f"unknown key in home pose: {key!r}")
            self._home[self._keys.index(key)] = float(value)
        self._reset_noise = float(reset_noise_rad)
        self._timestep = float(m.opt.timestep)
        self.reset()

    # -- HardwareAdapter ------------------------------------------------------------------------------------
    def arm_names(self) -> tuple[str, ...]:
        return self._arms

    def joint_names(self, arm: str) -> tuple[str, ...]:
        return self._joints[arm]

    def keys(self) -> tuple[str, ...]:
        return self._keys

    @property
    def timestep_s(self) -> float:
        return self._timestep

    def read(self) -> JointReadings:
        d = self._data
        return JointReadings(
            self._keys, d.qpos[self._qadr], d.qvel[self._dadr], d.qfrc_actuator[self._dadr], float(d.time)
        )

    def command(self, targets: Mapping[str, float]) -> None:
        ctrl = self._data.ctrl
        index = self._ctrl_index
        for key, value in targets.items():
            ctrl[index[key]] = value

    def hold(self, arms: "tuple[str, ...] | None" = None) -> None:
        d = self._data
        for arm in arms if arms is not None else self._arms:
            slots = self._arm_slots[arm]
            here = d.qpos[self._qadr[slots]]
            d.ctrl[self._act[slots]] = here
            # The servo input filter would otherwise keep moving toward the old target.
            d.act[self._actadr[slots]] = here

    def step(self, dt: float) -> None:
        n = int(round(dt / self._timestep))
        if n > 0:
            mujoco.mj_step(self._model, self._data, nstep=n)

    def reset(self, seed: int | None = None) -> None:
        m, d = self._model, self._data
        mujoco.mj_resetData(m, d)
        pose = self._home.copy()
        if self._reset_noise > 0.0:
            pose += np.random.default_rng(seed).uniform(-self._reset_noise, self._reset_noise, pose.shape)
        lo = m.jnt_range[:, 0]
        hi = m.jnt_range[:, 1]
        d.qpos[self._qadr] = pose
        d.qpos[:] = np.clip(d.qpos, lo, hi)  # one hinge per qpos slot in this model
        here = d.qpos[self._qadr]
        d.ctrl[self._act] = here
        d.act[self._actadr] = here
        mujoco.mj_forward(m, d)

    def time_s(self) -> float:
        return float(self._data.time)

    # -- simulation extras ----------------------------------------------------------------------------------
    @property
    def model(self) -> "mujoco.MjModel":
        return self._model

    @property
    def data(self) -> "mujoco.MjData":
        return self._data
