"""Hardware bindings by name.

The built-in mujoco one, module:factory, refusals with a reason; and a second, real adapter — a kinematic arm
pair that integrates commanded positions — that the driver node runs through its ``hardware`` parameter
(test_arm_driver_node.py brings the node up with it).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pytest

from strands_robots.arm import hardware
from strands_robots.arm.adapter import HardwareAdapter, JointReadings
from strands_robots.arm.config import DriverConfig
from strands_robots.arm.driver import DriverCore

KINEMATIC = "test_driver_hardware:kinematic_hardware"


class KinematicArms:
    """Two arms whose joints move toward their targets at the joint's rated speed (no dynamics, no torque).

    Enough to run the driver without MuJoCo: positions integrate the commanded targets; efforts read 0.
    """

    def __init__(self, config: DriverConfig) -> None:
        specs = config.joint_specs()
        self._keys = tuple(specs)
        self._arms = tuple(dict.fromkeys(k.partition(".")[0] for k in self._keys))
        self._speed = np.array([specs[k].max_velocity * 0.5 for k in self._keys])
        self._home = np.array([float(config.home.get(k, 0.0)) for k in self._keys])
        self._timestep = float(config.timestep_s)
        self.reset()

    def arm_names(self) -> tuple[str, ...]:
        return self._arms

    def joint_names(self, arm: str) -> tuple[str, ...]:
        return tuple(k.partition(".")[2] for k in self._keys if k.startswith(arm + "."))

    def keys(self) -> tuple[str, ...]:
        return self._keys

    @property
    def timestep_s(self) -> float:
        return self._timestep

    def read(self) -> JointReadings:
        return JointReadings(self._keys, self._pos.copy(), self._vel.copy(), np.zeros(len(self._keys)), self._time)

    def command(self, targets: Mapping[str, float]) -> None:
        for key, value in targets.items():
            self._target[self._keys.index(key)] = value

    def hold(self, arms=None) -> None:
        for i, key in enumerate(self._keys):
            if arms is None or key.partition(".")[0] in arms:
                self._target[i] = self._pos[i]

    def step(self, dt: float) -> None:
        n = int(round(dt / self._timestep))
        for _ in range(n):
            move = np.clip(self._target - self._pos, -self._speed * self._timestep, self._speed * self._timestep)
            self._pos = self._pos + move
            self._vel = move / self._timestep
            self._time += self._timestep

    def reset(self, seed=None) -> None:
        self._pos = self._home.copy()
        self._target = self._pos.copy()
        self._vel = np.zeros(len(self._keys))
        self._time = 0.0

    def time_s(self) -> float:
        return self._time


def kinematic_hardware(config: DriverConfig) -> KinematicArms:
    """Build the binding the node's ``hardware`` parameter names (a bare adapter: generic real-time runner)."""
    return KinematicArms(config)


def test_kinematic_arms_are_a_hardware_adapter_the_core_runs():
    arms = KinematicArms(DriverConfig.default())
    assert isinstance(arms, HardwareAdapter)
    core = DriverCore(arms, DriverConfig.default())
    report = core.move_to_start_pose()
    assert report.reached, report.detail
    assert core.observe()["left.joint_2.pos"] == pytest.approx(core.config.start_pose.pose["left.joint_2"], abs=0.02)


def test_builtin_mujoco_resolves_without_an_entry_point():
    pytest.importorskip("mujoco")
    built = hardware.load("mujoco", DriverConfig.default())
    assert built.name == "mujoco" and built.make_runner is not None
    assert built.adapter.keys()[0] == "left.joint_1"


def test_module_factory_resolves_and_gets_the_generic_runner():
    built = hardware.load(KINEMATIC, DriverConfig.default())
    assert isinstance(built.adapter, KinematicArms) and built.make_runner is None
    core = DriverCore(built.adapter, DriverConfig.default())
    runner = built.runner(core, lambda: None, lambda exc: None)
    assert runner.rate_hz == pytest.approx(1.0 / DriverConfig.default().timestep_s)


@pytest.mark.parametrize("name,reason", [
    ("", "hardware must name an adapter, e.g. 'mujoco'"),
    ("no_such_arm", "unknown hardware 'no_such_arm': not built in, not an entry point of 'strands_robots.hardware'"),
    ("no_such_module:factory", "hardware 'no_such_module:factory' cannot be loaded: ModuleNotFoundError"),
    ("test_driver_hardware:missing", "hardware 'test_driver_hardware:missing' cannot be loaded: AttributeError"),
])
def test_unknown_hardware_is_refused_with_reason(name, reason):
    with pytest.raises(hardware.HardwareError) as err:
        hardware.load(name, DriverConfig.default())
    assert str(err.value).startswith(reason)


def test_a_factory_that_builds_no_adapter_is_refused():
    with pytest.raises(hardware.HardwareError, match="built a dict, not a HardwareAdapter"):
        hardware.load("test_driver_hardware:_not_an_adapter", DriverConfig.default())


def _not_an_adapter(config):
    return {}
