"""Any generated message <-> nested plain data, by rosidl introspection.

:func:`msg_to_dict` / :func:`dict_to_msg` handle nested types, bounded and unbounded sequences, fixed arrays as
lists and ``builtin_interfaces/Time`` as ``{"sec", "nanosec"}``. The dict form is the one ``mcap_ros2`` serializes.
"""

from __future__ import annotations

from typing import Any, Mapping

from strands_robots.conversions.messages import message_class, resolve


# -- generic, by introspection --------------------------------------------------------------------------------
_PLAIN, _NESTED, _NESTED_SEQ, _PRIM_SEQ = range(4)
_FLOAT_TYPES = frozenset({"float", "double", "long double"})
_PLANS: dict[type, tuple[tuple[str, int, Any, bool], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, int, Any, bool], ...]:
    """Per field: (name, shape, nested class or None, is a float) from the class's rosidl SLOT_TYPES."""
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    from rosidl_parser.definition import AbstractNestedType, BasicType, NamespacedType

    rows = []
    for name, slot in zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES):
        if isinstance(slot, NamespacedType):
            rows.append((name, _NESTED, resolve(slot.namespaces[0], slot.namespaces[1:], slot.name), False))
        elif isinstance(slot, AbstractNestedType):
            inner = slot.value_type
            if isinstance(inner, NamespacedType):
                sub = resolve(inner.namespaces[0], inner.namespaces[1:], inner.name)
                rows.append((name, _NESTED_SEQ, sub, False))
            else:
                is_float = isinstance(inner, BasicType) and inner.typename in _FLOAT_TYPES
                rows.append((name, _PRIM_SEQ, None, is_float))
        else:
            is_float = isinstance(slot, BasicType) and slot.typename in _FLOAT_TYPES
            rows.append((name, _PLAIN, None, is_float))
    plan = tuple(rows)
    _PLANS[cls] = plan
    return plan


def msg_to_dict(msg: Any) -> dict[str, Any]:
    """Any generated message as nested plain data: dicts, lists, str, int, float, bool (and bytes for byte).

    Numeric arrays (``array.array``, numpy) become lists; nested messages become dicts; ``Time`` becomes
    ``{"sec": ..., "nanosec": ...}``. Constants are not fields and are not included.
    """
    out: dict[str, Any] = {}
    for name, shape, _, _ in _plan(type(msg)):
        value = getattr(msg, name)
        if shape == _PLAIN:
            out[name] = value.item() if hasattr(value, "item") else value
        elif shape == _NESTED:
            out[name] = msg_to_dict(value)
        elif shape == _NESTED_SEQ:
            out[name] = [msg_to_dict(v) for v in value]
        else:
            out[name] = value.tolist() if hasattr(value, "tolist") else list(value)
    return out


def dict_to_msg(cls: "type | str", d: Mapping[str, Any]) -> Any:
    """Build a message of ``cls`` (a class or a type name) from its dict form; missing keys keep defaults.

    Ints are accepted for float fields. An unknown key is refused (a typo would otherwise vanish), and on
    distros that support it the generated setters check every value's type and range.

    :raises KeyError: a key that is not a field of ``cls``.
    """
    if isinstance(cls, str):
        cls = message_class(cls)
    plan = _plan(cls)
    unknown = set(d) - {row[0] for row in plan}
    if unknown:
        raise KeyError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    # Kilted+ skips setter checks unless asked; this path is not hot, so ask (Humble always checks).
    msg = cls(check_fields=True) if "_check_fields" in getattr(cls, "__slots__", ()) else cls()
    for name, shape, sub, is_float in plan:
        if name not in d:
            continue
        value = d[name]
        if shape == _PLAIN:
            setattr(msg, name, float(value) if is_float else value)
        elif shape == _NESTED:
            setattr(msg, name, value if isinstance(value, sub) else dict_to_msg(sub, value))
        elif shape == _NESTED_SEQ:
            setattr(msg, name, [v if isinstance(v, sub) else dict_to_msg(sub, v) for v in value])
        else:
            setattr(msg, name, [float(v) for v in value] if is_float else list(value))
    return msg

