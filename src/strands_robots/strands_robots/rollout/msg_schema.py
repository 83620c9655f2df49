"""Complete ROS 2 message definitions ("ros2msg" schema text) read from the installed .msg files.

An MCAP schema for a ROS 2 type is the type's own .msg text followed by the text of every type it depends
on, recursively, each after a two-line delimiter (80 ``=`` then ``MSG: pkg/Type``) — the layout rosbag2
writes, so ``ros2 bag``, Foxglove and ``mcap_ros2`` decode our recordings. Texts are kept verbatim
(comments and constants included) and read from the installed share directories, so a recording's schemas
always match the messages the running system was built with.

Lookup order for ``pkg/Type`` (no ament_index / rclpy needed):

1. ``search_path`` when given: each entry is a share directory (``<entry>/<pkg>/msg/<Type>.msg``) or an
   install prefix (``<entry>/share/<pkg>/msg/<Type>.msg``); nothing else is searched.
2. otherwise every ``AMENT_PREFIX_PATH`` entry's ``share/<pkg>/msg/<Type>.msg``, overlays first,
3. then the share directory of the prefix ``<pkg>``'s Python module is installed in (found without importing it:
   ROS not sourced),
4. then this repository's source tree, ``src/<pkg>/msg/<Type>.msg`` (an uninstalled checkout).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

DELIMITER = "=" * 80

# Field types that are not messages. Bounded strings (string<=N) are reduced to their base type first.
PRIMITIVE_TYPES = frozenset({
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
    "int64", "uint64", "string", "wstring",
})

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_TYPE_NAME = re.compile(rf"^({_NAME})/(?:msg/)?({_NAME})$")


class MsgDefinitionNotFound(LookupError):
    """No .msg file for a type in any searched directory."""


def split_type_name(type_name: str) -> tuple[str, str]:
    """``("pkg", "Type")`` from ``pkg/Type`` or ``pkg/msg/Type``; ValueError for anything else."""
    match = _TYPE_NAME.match(type_name.strip())
    if not match:
        raise ValueError(f"not a ROS 2 message type name: {type_name!r} (expected pkg/msg/Type or pkg/Type)")
    return match.group(1), match.group(2)


def canonical_type_name(type_name: str) -> str:
    """``pkg/msg/Type``, the name MCAP schemas and ``ros2 bag`` use for a message type."""
    package, name = split_type_name(type_name)
    return f"{package}/msg/{name}"


def candidate_paths(type_name: str, search_path: Sequence[str | os.PathLike[str]] | None = None) -> list[Path]:
    """Every place the .msg file of ``type_name`` is looked for, in order."""
    package, name = split_type_name(type_name)
    relative = Path(package, "msg", f"{name}.msg")
    if search_path is not None:
        out: list[Path] = []
        for entry in search_path:
            out.append(Path(entry) / relative)
            out.append(Path(entry) / "share" / relative)
        return out
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    out = [Path(p) / "share" / relative for p in prefixes]
    module_share = _module_prefix_share(package)
    if module_share is not None:
        out.append(module_share / "msg" / f"{name}.msg")
    from strands_robots.package_files import checkout_dir

    checkout = checkout_dir()  # src/strands_robots: the message packages are its siblings
    if checkout is not None:
        out.append(checkout.parent / relative)
    return out


def _module_prefix_share(package: str) -> "Path | None":
    """``<prefix>/share/<package>`` of the prefix the package's Python module is installed in, or None."""
    import importlib.util

    from strands_robots.package_files import prefix_share_dir

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        share = prefix_share_dir(location, package)
        if share is not None:
            return share
    return None


def find_msg_file(type_name: str, search_path: Sequence[str | os.PathLike[str]] | None = None) -> Path:
    """Return the first existing .msg file for ``type_name``; MsgDefinitionNotFound lists where it looked."""
    candidates = candidate_paths(type_name, search_path)
    for path in candidates:
        if path.is_file():
            return path
    searched = ", ".join(str(p) for p in candidates) or "(nothing to search)"
    raise MsgDefinitionNotFound(f"no .msg definition for {type_name}; searched {searched}")


@dataclass(frozen=True)
class FieldSpec:
    """One field of a message.

    Its name, its message type (``pkg/Type``; empty for a primitive) and whether it is an array (``[]``,
    ``[N]`` or ``[<=N]``).
    """

    name: str
    message_type: str
    is_array: bool


def parse_fields(msg_text: str, package: str) -> tuple[FieldSpec, ...]:
    """Return the fields of one .msg text, in order; constants and comments are skipped.

    An unqualified message type belongs to the message's own package.
    """
    fields: list[FieldSpec] = []
    for raw in msg_text.splitlines():
        tokens = raw.split()
        if len(tokens) < 2 or tokens[0].startswith("#"):
            continue
        field_type, name = tokens[0], tokens[1].split("#", 1)[0]
        if "=" in name or (len(tokens) > 2 and tokens[2].startswith("=")):
            continue  # a constant (always primitive)
        is_array = "[" in field_type
        base = field_type.split("[", 1)[0].split("<=", 1)[0]  # drop [], [N], [<=N] and a string bound
        if base in PRIMITIVE_TYPES:
            fields.append(FieldSpec(name, "", is_array))
            continue
        if "/" in base:
            dep_package, dep_name = split_type_name(base)
        else:
            dep_package, dep_name = package, base
        fields.append(FieldSpec(name, f"{dep_package}/{dep_name}", is_array))
    return tuple(fields)


def field_dependencies(msg_text: str, package: str) -> list[str]:
    """Return the message types (``pkg/Type``, sorted, unique) that the fields of one .msg text use."""
    return sorted({f.message_type for f in parse_fields(msg_text, package) if f.message_type})


class MsgDefinitions:
    """Reads .msg files (each once) and builds complete definitions from them.

    :param search_path: share directories or install prefixes to search instead of the environment.
    """

    def __init__(self, search_path: Sequence[str | os.PathLike[str]] | None = None) -> None:
        self._search_path = None if search_path is None else tuple(search_path)
        self._texts: dict[str, str] = {}
        self._files: dict[str, Path] = {}

    def msg_text(self, type_name: str) -> str:
        """Return the verbatim .msg text of one type."""
        package, name = split_type_name(type_name)
        key = f"{package}/{name}"
        if key not in self._texts:
            path = find_msg_file(key, self._search_path)
            self._files[key] = path
            self._texts[key] = path.read_text(encoding="utf-8")
        return self._texts[key]

    def msg_file(self, type_name: str) -> Path:
        """Which file the text of ``type_name`` was read from."""
        package, name = split_type_name(type_name)
        self.msg_text(type_name)
        return self._files[f"{package}/{name}"]

    def fields(self, type_name: str) -> tuple[FieldSpec, ...]:
        """Return the fields of ``type_name`` (see :func:`parse_fields`)."""
        package, _ = split_type_name(type_name)
        return parse_fields(self.msg_text(type_name), package)

    def full_text(self, type_name: str) -> str:
        """Return the complete definition: the type's text, then each dependency (depth first, each once)."""
        package, name = split_type_name(type_name)
        seen = {f"{package}/{name}"}
        parts: list[str] = []

        def append(type_key: str, depth: int) -> None:
            if depth > 64:
                raise ValueError(f"message definition of {type_name} nests deeper than 64 levels")
            dep_package = type_key.split("/", 1)[0]
            text = self.msg_text(type_key)
            parts.append(text)
            for dep in field_dependencies(text, dep_package):
                if dep not in seen:
                    seen.add(dep)
                    parts.append(f"\n{DELIMITER}\nMSG: {dep}\n")
                    append(dep, depth + 1)

        append(f"{package}/{name}", 0)
        return "".join(parts)


def full_text(type_name: str, search_path: Sequence[str | os.PathLike[str]] | None = None) -> str:
    """Return the complete ros2msg definition of ``type_name`` (see :class:`MsgDefinitions`)."""
    return MsgDefinitions(search_path).full_text(type_name)
