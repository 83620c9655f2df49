"""Which arms the driver runs: a named hardware binding, found through an entry-point group.

A binding is a factory ``(config: DriverConfig) -> Hardware`` (or one returning a bare
:class:`~strands_robots.arm.adapter.HardwareAdapter`, which then runs on the generic real-time stepper). It is
named by the driver node's read-only ``hardware`` parameter and resolved, in order:

1. a built-in name: ``mujoco`` (the simulated two-arm model; no entry point needed, so it works from the
   source tree and before the package is installed);
2. an entry point of the group ``strands_robots.hardware`` (how a real arm's package plugs in:
   ``entry_points={"strands_robots.hardware": ["my_arm = my_pkg.arm:hardware"]}``);
3. ``module:attribute``, a factory importable by path (tests and experiments).

The binding owns the thread that lets adapter time pass (``make_runner``): the simulator's physics thread is
the simulator's, not the node's. No rclpy here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

from strands_robots.arm.adapter import HardwareAdapter
from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.realtime import RealTimeStepper, Runner, Steppable

ENTRY_POINT_GROUP = "strands_robots.hardware"
BUILTIN = {"mujoco": "strands_robots.arm.mujoco_sim:hardware"}

RunnerFactory = Callable[[Steppable, Callable[[], None], Callable[[BaseException], None]], Runner]


class HardwareError(ConfigError):
    """The named hardware cannot be found or built (the reason says which and why)."""


@dataclass(frozen=True)
class Hardware:
    """A built binding: the arms, and how to run them in real time.

    :param name: as named (``mujoco``, an entry point name, or ``module:attr``).
    :param adapter: the arms.
    :param make_runner: ``(core, on_tick, on_fault) -> Runner``; None: the generic :class:`RealTimeStepper`
        at the adapter's timestep.
    """

    name: str
    adapter: HardwareAdapter
    make_runner: Optional[RunnerFactory] = None

    def runner(self, core: Steppable, on_tick: Callable[[], None],
               on_fault: Callable[[BaseException], None]) -> Runner:
        if self.make_runner is not None:
            return self.make_runner(core, on_tick, on_fault)
        adapter = self.adapter
        return RealTimeStepper(core, float(adapter.timestep_s), adapter.time_s, on_tick, on_fault)


def _import(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _entry_point(name: str) -> Any:
    from importlib.metadata import entry_points

    try:
        found = entry_points(group=ENTRY_POINT_GROUP)
    except TypeError:  # Python < 3.10 API shape; kept for odd environments
        found = entry_points().get(ENTRY_POINT_GROUP, ())  # type: ignore[attr-defined]
    for ep in found:
        if ep.name == name:
            return ep
    return None


def available() -> tuple[str, ...]:
    """Built-in names and the entry points of the group, for refusal messages."""
    from importlib.metadata import entry_points

    try:
        names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:
        names = set()
    return tuple(sorted(set(BUILTIN) | names))


def resolve(name: str) -> Callable[[DriverConfig], Any]:
    """Return the factory named ``name`` (see the module docstring for the order).

    :raises HardwareError: unknown name, or the factory cannot be imported.
    """
    if not isinstance(name, str) or not name.strip():
        raise HardwareError("hardware must name an adapter, e.g. 'mujoco'")
    name = name.strip()
    try:
        if name in BUILTIN:
            return _import(BUILTIN[name])
        ep = _entry_point(name)
        if ep is not None:
            return ep.load()
        if ":" in name:
            return _import(name)
    except (ImportError, AttributeError) as exc:
        raise HardwareError(f"hardware {name!r} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    raise HardwareError(f"unknown hardware {name!r}: not built in, not an entry point of "
                        f"{ENTRY_POINT_GROUP!r} (known: {', '.join(available())}) and not module:factory")


def load(name: str, config: DriverConfig) -> Hardware:
    """Build the named hardware for ``config``.

    :raises HardwareError: unknown name, the factory failed, or what it built is not a hardware adapter.
    """
    factory = resolve(name)
    try:
        built = factory(config)
    except ConfigError:
        raise
    except Exception as exc:
        raise HardwareError(f"hardware {name!r} failed to start: {type(exc).__name__}: {exc}") from exc
    if isinstance(built, Hardware):
        return built
    if isinstance(built, HardwareAdapter):
        return Hardware(name, built)
    raise HardwareError(f"hardware {name!r} built a {type(built).__name__}, not a HardwareAdapter")
