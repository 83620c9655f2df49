"""Observations <-> ``sensor_msgs/JointState``, the driver's robot time beside the stamp, and ``/clock``."""

from __future__ import annotations

from array import array
from typing import Any, Mapping

from strands_robots.conversions.messages import NS_PER_S, ros, seconds_to_ns, time_to_ns

_JOINT_SUFFIXES = (".pos", ".vel", ".effort")
SIM_TIME_KEY = "sim_time_s"


# -- observations <-> JointState ------------------------------------------------------------------------------
_LAYOUTS: dict[tuple[str, ...], tuple[list[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _joint_layout(keys: tuple[str, ...]) -> tuple[list[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Joint names in order of first appearance, and the observation keys of each quantity.

    A quantity that some joint lacks is left out entirely (JointState: each array is empty or one per name).
    """
    names: list[str] = []
    seen: dict[str, set[str]] = {}
    for key in keys:
        base, dot, suffix = key.rpartition(".")
        if dot and "." + suffix in _JOINT_SUFFIXES:
            if base not in seen:
                seen[base] = set()
                names.append(base)
            seen[base].add(suffix)

    def keys_for(suffix: str) -> tuple[str, ...]:
        if names and all(suffix in seen[n] for n in names):
            return tuple(f"{n}.{suffix}" for n in names)
        return ()

    layout = (names, keys_for("pos"), keys_for("vel"), keys_for("effort"))
    if len(_LAYOUTS) > 64:  # a handful of robots per process; bound it anyway
        _LAYOUTS.clear()
    _LAYOUTS[keys] = layout
    return layout


def observation_to_joint_state(observation: Mapping[str, Any], stamp_ns: "int | None" = None,
                               frame_id: str = "") -> Any:
    """``sensor_msgs/JointState`` of an observation (``<arm>.<joint>.pos/.vel/.effort`` and ``sim_time_s``).

    ``name`` is ``<arm>.<joint>``; other keys (cameras, text) are ignored.

    :param stamp_ns: header stamp; by default the observation's ``sim_time_s`` (robot time; 0 when absent).
    """
    keys = tuple(observation)
    layout = _LAYOUTS.get(keys) or _joint_layout(keys)
    names, pos_keys, vel_keys, eff_keys = layout
    get = observation.__getitem__
    r = ros()
    if stamp_ns is None:
        stamp_ns = seconds_to_ns(float(observation.get(SIM_TIME_KEY, 0.0)))
    stamp = r.new_time()
    stamp.sec, stamp.nanosec = divmod(int(stamp_ns), NS_PER_S)
    header = r.new_header()
    header.stamp = stamp
    header.frame_id = frame_id
    msg = r.new_joint_state()  # every field is assigned below
    msg.header = header
    msg.name = list(names)
    position = array("d", map(get, pos_keys))
    velocity = array("d", map(get, vel_keys))
    effort = array("d", map(get, eff_keys))
    if r.raw_joint_arrays:
        msg._position, msg._velocity, msg._effort = position, velocity, effort
    else:
        msg.position, msg.velocity, msg.effort = position, velocity, effort
    return msg


def joint_state_to_observation(msg: Any, sim_time_s: "float | None" = None) -> dict[str, float]:
    """Return the observation dict of a ``JointState`` (absent arrays add no keys).

    :param sim_time_s: robot time to report; by default the header stamp in seconds.
    """
    obs: dict[str, float] = {}
    names = msg.name
    for suffix, values in (("pos", msg.position), ("vel", msg.velocity), ("effort", msg.effort)):
        if len(values) == len(names):
            obs.update(zip([f"{n}.{suffix}" for n in names], values))
    obs[SIM_TIME_KEY] = sim_time_s if sim_time_s is not None else time_to_ns(msg.header.stamp) / NS_PER_S
    return obs


# -- the driver's joint_states and /clock --------------------------------------------------------------------
# JointState.header.stamp is the driver's node clock (ROS time: honours use_sim_time), so a subscriber can judge
# a reading's age; the robot (simulation) time of the reading rides in header.frame_id as
# "sim_time_s=<seconds>" (JointState has no other free field, and joint consumers do not use its frame_id).
ROBOT_TIME_FRAME_PREFIX = "sim_time_s="


def driver_joint_state(observation: Mapping[str, Any], stamp_ns: int) -> Any:
    """``JointState`` as the driver publishes it: stamped ``stamp_ns`` (node clock), robot time in frame_id."""
    robot_time = float(observation.get(SIM_TIME_KEY, 0.0))
    return observation_to_joint_state(observation, stamp_ns=stamp_ns,
                                      frame_id=f"{ROBOT_TIME_FRAME_PREFIX}{robot_time:.9f}")


def joint_state_robot_time_s(msg: Any) -> "float | None":
    """Return the robot time a driver ``JointState`` carries (see :func:`driver_joint_state`).

    None when it carries none (another publisher: then only the stamp is known).
    """
    frame = msg.header.frame_id
    if not frame.startswith(ROBOT_TIME_FRAME_PREFIX):
        return None
    try:
        return float(frame[len(ROBOT_TIME_FRAME_PREFIX):])
    except ValueError:
        return None


def driver_joint_state_to_observation(msg: Any) -> dict[str, float]:
    """Return the observation of a driver ``JointState``, ``sim_time_s`` being the robot time it carries.

    A JointState from elsewhere falls back to its stamp.
    """
    return joint_state_to_observation(msg, sim_time_s=joint_state_robot_time_s(msg))


def clock_msg(robot_time_s: float) -> Any:
    """Build the ``rosgraph_msgs/Clock`` of the robot time (``/clock`` when the driver offers simulation time)."""
    from rosgraph_msgs.msg import Clock

    m = Clock()
    m.clock.sec, m.clock.nanosec = divmod(seconds_to_ns(robot_time_s), NS_PER_S)
    return m

