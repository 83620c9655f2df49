"""Every strands_robots_msgs interface, listed by the ament index, with its declared fields.

A fully populated instance survives real DDS and the generic dict path unchanged.
"""

from __future__ import annotations

import importlib
import math
import os
import re

import pytest

PKG = "strands_robots_msgs"
SRC = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", PKG))


# -- the interfaces as the source tree declares them (collection works without ROS) -------------------------
def _source_interfaces() -> list[str]:
    """``msg/Task``, ``srv/SendAction``, ``action/RunEpisode`` ... from the .msg/.srv/.action files."""
    out = []
    for kind in ("msg", "srv", "action"):
        folder = os.path.join(SRC, kind)
        for name in sorted(os.listdir(folder)):
            stem, ext = os.path.splitext(name)
            if ext == "." + kind:
                out.append(f"{kind}/{stem}")
    return out


_PARTS = {"msg": ("",), "srv": ("Request", "Response"), "action": ("Goal", "Result", "Feedback")}


def _message_types() -> list[str]:
    """One id per message type: ``msg/Task``, ``srv/SendAction.Request``, ``action/RunEpisode.Goal``."""
    out = []
    for iface in _source_interfaces():
        kind = iface.split("/")[0]
        out += [iface + ("." + part if part else "") for part in _PARTS[kind]]
    return out


def _declared_sections(iface: str) -> list[list[tuple[str, str]]]:
    """(type, name) of every field per section (msg: 1, srv: 2, action: 3), constants left out."""
    kind, name = iface.split("/")
    with open(os.path.join(SRC, kind, f"{name}.{kind}"), encoding="utf-8") as f:
        text = f.read()
    sections: list[list[tuple[str, str]]] = [[]]
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line == "---":
            sections.append([])
            continue
        if not line:
            continue
        ftype, rest = line.split(None, 1)
        if "=" in rest.split(None, 1)[0]:
            continue  # a constant
        sections[-1].append((ftype, rest.split()[0]))
    return sections


_PRIMITIVES = {"bool": "boolean", "byte": "octet", "char": "uint8", "float32": "float", "float64": "double"}


def _introspection_type(declared: str) -> str:
    """``float64[]`` -> ``sequence<double>``, ``RunPolicyStep[<=1]`` -> ``sequence<pkg/RunPolicyStep, 1>``."""
    m = re.fullmatch(r"([\w/]+)(<=\d+)?(\[(<=)?(\d*)\])?", declared)
    assert m, f"unparsed field type {declared!r}"
    base, string_bound, array, upper, size = m.groups()
    if base in _PRIMITIVES:
        base = _PRIMITIVES[base]
    elif base not in ("string", "wstring") and not re.fullmatch(r"u?int(8|16|32|64)", base):
        base = base if "/" in base else f"{PKG}/{base}"
    if string_bound:
        base = f"{base}<{string_bound[2:]}>"
    if not array:
        return base
    if upper:
        return f"sequence<{base}, {size}>"
    return f"sequence<{base}>" if not size else f"{base}[{size}]"


def _message_class(type_id: str):
    iface, _, part = type_id.partition(".")
    kind, name = iface.split("/")
    cls = getattr(importlib.import_module(f"{PKG}.{kind}"), name)
    return getattr(cls, part) if part else cls


# -- populating by introspection --------------------------------------------------------------------------
_INT_VALUES = {  # distinctive, away from 0, and wide enough to catch a narrowing on the wire
    "int8": -100, "uint8": 200, "int16": -(2 ** 14), "uint16": 2 ** 15, "int32": -(2 ** 30), "uint32": 2 ** 31,
    "int64": -(2 ** 62), "uint64": 2 ** 63,
}


def _value(slot, n: int, name: str):
    from rosidl_parser.definition import (AbstractNestedType, AbstractString, AbstractWString, Array,
                                          BasicType, BoundedSequence, BoundedString, BoundedWString,
                                          NamespacedType)

    if isinstance(slot, NamespacedType):
        cls = getattr(importlib.import_module(".".join(slot.namespaces)), slot.name)
        return populated(cls, n * 10)
    if isinstance(slot, AbstractNestedType):
        if isinstance(slot, Array):
            size = slot.size
        elif isinstance(slot, BoundedSequence):
            size = min(2, slot.maximum_size)
        else:
            size = 2
        return [_value(slot.value_type, n + k, name) for k in range(size)]
    if isinstance(slot, (AbstractString, AbstractWString)):
        text = f"{name}-{n}-é✓"  # non-ASCII: UTF-8 on the wire
        if isinstance(slot, (BoundedString, BoundedWString)):
            text = text[: slot.maximum_size]
        return text
    assert isinstance(slot, BasicType), slot
    t = slot.typename
    if t == "boolean":
        return True
    if t in ("float", "double"):
        return (n + 0.5) if t == "float" else -(n + 0.25) * 1e100
    if t in _INT_VALUES:
        base = _INT_VALUES[t]
        return base - (n % 20) if base < 0 else base + (n % 20)
    if t == "octet":
        return bytes([n % 256])
    if t == "char":
        return chr(ord("A") + n % 26)
    raise AssertionError(f"no sample value for {t}")


def populated(cls, salt: int = 0):
    """Build an instance with every field set to a distinctive non-default value, sequences non-empty."""
    msg = cls()
    for i, (name, slot) in enumerate(zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES)):
        setattr(msg, name, _value(slot, salt + i + 1, name))
    return msg


def _field_differences(a, b, path: str) -> list[str]:
    """Field by field (recursing into nested messages and sequences), every place where a and b differ."""
    if hasattr(type(a), "get_fields_and_field_types"):
        if type(a) is not type(b):
            return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
        out = []
        for name in type(a).get_fields_and_field_types():
            out += _field_differences(getattr(a, name), getattr(b, name), f"{path}.{name}")
        return out
    if not isinstance(a, (str, bytes)) and hasattr(a, "__len__"):
        a, b = list(a), list(b)
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _field_differences(x, y, f"{path}[{i}]")
        return out
    same = a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
    return [] if same else [f"{path}: {a!r} != {b!r}"]


# -- tests ------------------------------------------------------------------------------------------------
def test_interface_introspection_lists_every_message_without_ros2_cli():
    pytest.importorskip(f"{PKG}.msg", reason="generated messages not importable; source scripts/env.sh")
    try:
        from ament_index_python.packages import get_resource

        listing, _ = get_resource("rosidl_interfaces", PKG)
    except ImportError:
        index = os.path.join(SRC, "..", "..", "install", PKG, "share", "ament_index", "resource_index",
                             "rosidl_interfaces", PKG)
        with open(index, encoding="utf-8") as f:
            listing = f.read()
    indexed = {os.path.splitext(line)[0] for line in listing.splitlines()
               if line.strip() and not line.endswith(".idl")}
    assert indexed == set(_source_interfaces()), "built package and source tree list different interfaces"

    for iface in _source_interfaces():
        kind = iface.split("/")[0]
        for section, part in zip(_declared_sections(iface), _PARTS[kind]):
            type_id = iface + ("." + part if part else "")
            cls = _message_class(type_id)
            declared = {name: _introspection_type(ftype) for ftype, name in section}
            generated = cls.get_fields_and_field_types()
            assert list(generated) == list(declared), f"{type_id}: fields differ from the {kind} file"
            assert generated == declared, f"{type_id}: field types differ from the {kind} file"


@pytest.mark.parametrize("type_id", _message_types())
def test_every_interface_round_trips_over_dds(type_id, dds_echo):
    from strands_robots.conversions.introspection import dict_to_msg, msg_to_dict

    cls = _message_class(type_id)
    original = populated(cls)
    default = msg_to_dict(cls())
    as_dict = msg_to_dict(original)
    unset = [name for name in as_dict if as_dict[name] == default[name]]
    assert not unset, f"sample leaves fields at their defaults: {unset}"
    constants = {k: getattr(cls, k) for k in dir(cls) if k.isupper() and k != "SLOT_TYPES"}

    received = dds_echo(original)

    assert _field_differences(original, received, cls.__name__) == []
    assert received == original
    assert {k: getattr(received, k) for k in constants} == constants
    # the generic dict path is lossless on every type too
    assert dict_to_msg(cls, msg_to_dict(received)) == original


def test_action_wrappers_add_only_goal_ids_and_status():
    """Goal/Result/Feedback convert on their own.

    The _SendGoal/_GetResult/_FeedbackMessage wrappers that rclpy's action server and client build only add a
    goal id, a stamp, acceptance and a status.
    """
    action = pytest.importorskip(f"{PKG}.action", reason="generated messages not importable")
    impl = action.RunEpisode.Impl
    wrapper_only = {"unique_identifier_msgs/UUID", "builtin_interfaces/Time", "boolean", "int8"}
    for cls, payload in (
        (impl.SendGoalService.Request, f"{PKG}/RunEpisode_Goal"),
        (impl.SendGoalService.Response, None),
        (impl.GetResultService.Request, None),
        (impl.GetResultService.Response, f"{PKG}/RunEpisode_Result"),
        (impl.FeedbackMessage, f"{PKG}/RunEpisode_Feedback"),
    ):
        types = set(cls.get_fields_and_field_types().values())
        assert types - {payload} <= wrapper_only, cls.__name__
        if payload:
            assert payload in types, cls.__name__
