"""The generated message classes, imported on first use, and ``builtin_interfaces/Time`` helpers.

Importing this module needs neither rclpy nor any generated package: :func:`ros` imports the classes the
control-rate paths use once, :func:`message_class` resolves any type name.
"""

from __future__ import annotations

import importlib
import os
import re
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence

PACKAGE = "strands_robots_msgs"
NS_PER_S = 1_000_000_000

# -- lazy message classes -----------------------------------------------------------------------------------
_ROS: SimpleNamespace | None = None


def ros() -> SimpleNamespace:
    """Return the message classes the fast paths use, imported once on first use."""
    global _ROS
    if _ROS is None:
        from builtin_interfaces.msg import Time
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Header
        from strands_robots_msgs import msg as m
        from strands_robots_msgs.srv import SendAction

        _ROS = SimpleNamespace(
            Time=Time,
            JointState=JointState,
            ObserverEvent=m.ObserverEvent,
            RunPolicyStarted=m.RunPolicyStarted,
            RunPolicyStep=m.RunPolicyStep,
            RunPolicyEnded=m.RunPolicyEnded,
            ActionCommand=m.ActionCommand,
            SafetyCheck=m.SafetyCheck,
            SafetyStop=m.SafetyStop,
            SendActionRequest=SendAction.Request,
            SendActionResponse=SendAction.Response,
            # Blank instances for the control-rate paths, which assign every field themselves.
            new_time=blank_factory(Time),
            new_header=blank_factory(Header),
            new_joint_state=blank_factory(JointState),
            new_event=blank_factory(m.ObserverEvent),
            new_step=blank_factory(m.RunPolicyStep),
            # Kilted's unchecked setters copy an array('d') element by element; the fast paths build exact
            # array('d') values, so they store them in the field's slot where the layout is the known one.
            raw_step_arrays=_plain_slots(m.RunPolicyStep),
            raw_joint_arrays=_plain_slots(JointState),
        )
    return _ROS


def _plain_slots(cls: type) -> bool:
    """Whether the class's state is exactly its fields as ``_<field>`` slots (plus Kilted's ``_check_fields``)."""
    slots = set(getattr(cls, "__slots__", ()))
    fields = {"_" + name for name in cls.get_fields_and_field_types()}
    return fields <= slots and slots - fields <= {"_check_fields"}


def blank_factory(cls: type) -> Callable[[], Any]:
    """Return a maker of instances whose fields are all still unset, for callers that assign every field.

    The generated ``__init__`` runs every setter once with a default (about 3 us for RunPolicyStep), and the
    fast paths then run them all again. ``__init__`` is only skipped where the class's state is exactly its
    fields (:func:`_plain_slots`; Kilted's ``_check_fields`` switch is kept as the environment sets it); any
    other class gets its ordinary constructor.
    """
    if not _plain_slots(cls):
        return cls
    new = cls.__new__
    if "_check_fields" not in cls.__slots__:
        return lambda: new(cls)
    check = os.environ.get("ROS_PYTHON_CHECK_FIELDS", "") == "1"

    def make() -> Any:
        m = new(cls)
        m._check_fields = check
        return m

    return make


_CLASS_CACHE: dict[str, type] = {}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def message_class(type_name: str) -> type:
    """Return the generated class for a type name.

    Accepts ``pkg/msg/Type``, ``pkg/Type`` (a msg), ``pkg/srv/SendAction_Request``,
    ``pkg/action/RunEpisode_Goal`` and the dotted ``pkg/srv/SendAction.Request`` form.
    """
    cls = _CLASS_CACHE.get(type_name)
    if cls is not None:
        return cls
    parts = type_name.split("/")
    if len(parts) == 2:
        pkg, ns, name = parts[0], "msg", parts[1]
    elif len(parts) == 3:
        pkg, ns, name = parts
    else:
        raise ValueError(f"not a ROS interface type name: {type_name!r}")
    cls = resolve(pkg, (ns,), name.replace(".", "_"))
    _CLASS_CACHE[type_name] = cls
    return cls


def resolve(pkg: str, namespaces: Sequence[str], name: str) -> type:
    module = importlib.import_module(".".join((pkg, *namespaces)))
    cls = getattr(module, name, None)
    if cls is None and "_" in name:
        # srv/action parts (SendAction_Request, RunEpisode_Goal) live in the interface's own module.
        base = name.split("_", 1)[0]
        sub = importlib.import_module(f"{module.__name__}._{_snake(base)}")
        cls = getattr(sub, name, None)
    if cls is None:
        raise ImportError(f"no generated class {pkg}/{'/'.join(namespaces)}/{name}")
    return cls


# -- time ---------------------------------------------------------------------------------------------------
def time_dict(ns: int) -> dict[str, int]:
    """``builtin_interfaces/Time`` dict form of integer nanoseconds (nanosec always in [0, 1e9))."""
    sec, nanosec = divmod(int(ns), NS_PER_S)
    return {"sec": sec, "nanosec": nanosec}


def time_to_ns(stamp: Any) -> int:
    """Integer nanoseconds of a ``builtin_interfaces/Time`` message or its dict form."""
    if isinstance(stamp, Mapping):
        return int(stamp["sec"]) * NS_PER_S + int(stamp["nanosec"])
    return stamp.sec * NS_PER_S + stamp.nanosec


def time_msg(ns: int) -> Any:
    """``builtin_interfaces/Time`` message of integer nanoseconds."""
    t = ros().Time()
    t.sec, t.nanosec = divmod(int(ns), NS_PER_S)
    return t


def seconds_to_ns(seconds: float) -> int:
    """Float seconds to integer nanoseconds, rounded (not truncated) so 0.1 s stays 100000000 ns."""
    return int(round(seconds * NS_PER_S))

