"""How a station's observation becomes an openpi server's request, and its ``actions`` the station's chunk.

A station observes joints as ``<arm>.<joint>.pos`` / ``.vel`` / ``.effort`` (``left.joint_1.pos`` ...
``right.gripper.pos``), cameras as HWC uint8 arrays under ``<camera>.image`` (``scene.image``, ``wrist.image``)
and commands actuator keys (``right.joint_1`` ... ``right.gripper``). An openpi server wants its own keys
(DROID's ``observation/joint_position``, ALOHA's ``state`` and ``images``, ...) and answers ``actions`` as an
array ``[H, D]``. An :class:`ObsMap` says how one becomes the other; :func:`load_obs_map` takes a preset name
(:data:`PRESETS`: ``droid_jointpos``, ``droid``, ``aloha``, ``libero``, ``roboarena``) or a YAML mapping file of
this form::

    action_space: joint_position   # what the server's actions are: joint_position, joint_velocity or delta
    prompt: prompt                 # server key given the task instruction (null: the instruction is not sent)
    state:                         # server key -> its entries, concatenated into one float32 vector
      observation/joint_position: [right.joint_1.pos, right.joint_2.pos, 0.0]   # a number: a constant entry
      observation/gripper_position:
        - {key: right.gripper.pos, scale: -1.25, offset: 1.0}                    # server = obs * scale + offset
    images:                        # server key -> a station camera, resized with padding to [height, width]
      observation/exterior_image_1_left: {camera: scene, size: [224, 224]}
      images.cam_high: {camera: scene, size: [224, 224], layout: chw}           # a dot nests: images/cam_high
    actions:                       # one entry per column of actions[H, D], in order; null ignores a column
      - right.joint_1
      - null
      - {key: right.gripper, scale: -0.8, offset: 0.8}                          # station = server * scale + offset
    extra: {}                      # constant keys sent with every request

A dot in a server key nests (``images.cam_high`` -> ``{"images": {"cam_high": ...}}``, as ALOHA servers take
their cameras). ``size`` omitted sends the camera's frame as it is. ``layout`` is ``hwc`` (default) or ``chw``.
An image is resized keeping its aspect ratio and padded with black to the size (:func:`resize_with_pad`, the
rule openpi's ``image_tools.resize_with_pad`` and TensorFlow's ``resize_with_pad`` follow).

**Action space.** Every mapping says what its server's actions are (``action_space``; a file that does not say
is ``joint_position``): this station applies each action as an absolute target of the key it names, so the
station's preflight refuses a mapping of another space before any arm moves. openpi's stock DROID checkpoints
(``pi0_droid``, ``pi0_fast_droid``, ``pi05_droid``) output joint *velocities*: the ``droid`` preset says
``joint_velocity``; ``pi05_droid_jointpos`` outputs joint positions: serve it with ``droid_jointpos``. ALOHA's
outputs are absolute joint positions (``aloha``); LIBERO's are end-effector deltas (``libero``: ``delta``).

**Gripper.** openpi's grippers run over [0, 1], 1 closed; this station's jaw opening runs over [0, 0.8], 0
closed. Every preset maps one onto the other closed to closed (server 1 -> 0, 0 -> 0.8) and declares the value
that closes it, so the station's preflight refuses a mapping whose gripper is inverted.

Needs numpy and Pillow (and PyYAML for a mapping file): ``pip install strands-robots-client[openpi]``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["ObsMap", "ObsMapError", "StateEntry", "ImageEntry", "ActionEntry", "PRESETS", "load_obs_map",
           "obs_map_from_mapping", "resize_with_pad", "roboarena_obs_map", "no_preset_named", "GRIPPER_RANGE",
           "OPENPI_GRIPPER_CLOSED", "ACTION_SPACES"]

#: Largest image side a mapping may ask for (a bound on what one request carries).
MAX_IMAGE_SIDE = 4096
#: Longest text of a mapping file read (a bound on what is parsed).
MAX_MAP_FILE_BYTES = 256 * 1024


#: numpy dtype kinds an answer's ``actions`` may have: signed and unsigned integers, floats.
REAL_KINDS = frozenset("iuf")
_KIND_NAMES = {"c": "complex numbers", "U": "strings", "S": "byte strings", "b": "booleans", "O": "objects",
               "V": "raw records", "M": "datetimes", "m": "time spans"}


class ObsMapError(ValueError):
    """A mapping that cannot be built, or an observation or answer it cannot map; the message names the key."""


@dataclass(frozen=True)
class StateEntry:
    """One element of a state vector: a station observation key (or a constant) times ``scale`` plus ``offset``."""

    key: Optional[str]
    constant: float = 0.0
    scale: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class ImageEntry:
    """A station camera (``<camera>.image``) sent under a server key, resized with padding to ``size``."""

    camera: str
    size: Optional[Tuple[int, int]] = None  # (height, width)
    layout: str = "hwc"


@dataclass(frozen=True)
class ActionEntry:
    """One column of the server's ``actions``: the station key it commands, ``station = server*scale + offset``."""

    key: str
    scale: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class ObsMap:
    """A complete mapping between one station and one openpi server's keys (see the module docstring)."""

    name: str
    state: Mapping[str, Tuple[StateEntry, ...]] = field(default_factory=dict)
    images: Mapping[str, ImageEntry] = field(default_factory=dict)
    actions: Tuple[Optional[ActionEntry], ...] = ()
    prompt: Optional[str] = "prompt"
    extra: Mapping[str, Any] = field(default_factory=dict)
    action_space: str = "joint_position"

    @property
    def action_keys(self) -> Tuple[str, ...]:
        """The station keys this mapping commands, in column order."""
        return tuple(a.key for a in self.actions if a is not None)

    @property
    def cameras(self) -> Tuple[str, ...]:
        """The station cameras this mapping sends."""
        return tuple(dict.fromkeys(e.camera for e in self.images.values()))

    # -- observation -> request ------------------------------------------------------------------------------
    def request(self, observation: Mapping[str, Any], prompt: Optional[str]) -> Dict[str, Any]:
        """Return the server's observation dict for one station ``observation`` and the task instruction."""
        out: Dict[str, Any] = {}
        for server_key, entries in self.state.items():
            values = np.empty(len(entries), dtype=np.float32)
            for i, entry in enumerate(entries):
                if entry.key is None:
                    values[i] = entry.constant
                    continue
                if entry.key not in observation:
                    raise ObsMapError(f"obs map {self.name!r}: {server_key}[{i}] needs the observation key "
                                      f"{entry.key!r}, which the station did not send")
                try:
                    raw = float(observation[entry.key])
                except (TypeError, ValueError):
                    raise ObsMapError(f"obs map {self.name!r}: observation {entry.key!r} is not a number: "
                                      f"{observation[entry.key]!r:.60}") from None
                values[i] = raw * entry.scale + entry.offset
            _put(out, server_key, values)
        for server_key, entry in self.images.items():
            key = f"{entry.camera}.image"
            if key not in observation:
                raise ObsMapError(f"obs map {self.name!r}: {server_key} needs the camera image {key!r}, which the "
                                  f"station did not send (its observation has no camera {entry.camera!r})")
            image = as_hwc_uint8(observation[key], key)
            if entry.size is not None:
                image = resize_with_pad(image, *entry.size)
            if entry.layout == "chw":
                image = np.ascontiguousarray(image.transpose(2, 0, 1))
            _put(out, server_key, image)
        if self.prompt is not None:
            _put(out, self.prompt, "" if prompt is None else str(prompt))
        for key, value in self.extra.items():
            _put(out, key, value)
        return out

    # -- answer -> chunk ----------------------------------------------------------------------------------------
    def chunk(self, actions: Any) -> List[Dict[str, float]]:
        """Return the station's action chunk (one ``{key: value}`` per row) for the server's ``actions``."""
        try:
            given = np.asarray(actions)
        except (TypeError, ValueError):  # ragged nesting numpy cannot even hold
            raise ObsMapError(f"obs map {self.name!r}: the server's actions are not numbers "
                              f"({type(actions).__name__})") from None
        # Only integers and floats are actions: a complex value would lose its imaginary part and a string be
        # parsed as a number if converted, so neither is converted; a boolean is no joint target either.
        if given.dtype.kind not in REAL_KINDS:
            what = _KIND_NAMES.get(given.dtype.kind, "not numbers")
            raise ObsMapError(f"obs map {self.name!r}: the server's actions are {what} (dtype {given.dtype.str}); "
                              "actions must be real numbers (integer or float)")
        array = given.astype(np.float64)
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape[0] == 0:
            raise ObsMapError(f"obs map {self.name!r}: the server's actions have shape {tuple(array.shape)}; "
                              f"expected [H, {len(self.actions)}] with H >= 1")
        if array.shape[1] != len(self.actions):
            raise ObsMapError(f"obs map {self.name!r}: the server's actions have {array.shape[1]} columns; the "
                              f"mapping names {len(self.actions)} ({', '.join(_column_names(self.actions))})")
        if not np.all(np.isfinite(array)):
            row, col = (int(i) for i in np.argwhere(~np.isfinite(array))[0])
            raise ObsMapError(f"obs map {self.name!r}: the server's actions[{row}, {col}] is {array[row, col]}")
        columns = [(i, a) for i, a in enumerate(self.actions) if a is not None]
        return [{a.key: float(row[i]) * a.scale + a.offset for i, a in columns} for row in array]


def _column_names(actions: Sequence[Optional[ActionEntry]]) -> List[str]:
    return ["-" if a is None else a.key for a in actions]


def _put(out: Dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = out
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ObsMapError(f"server key {dotted!r} nests under {part!r}, which already holds a value")
        node = child
    node[parts[-1]] = value


# -- images --------------------------------------------------------------------------------------------------------
def as_hwc_uint8(value: Any, key: str = "image") -> np.ndarray:
    """Return ``value`` (an HWC/HW array, nested lists, or JPEG/PNG bytes) as a contiguous HWC uint8 array."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        from PIL import Image

        try:
            with Image.open(io.BytesIO(bytes(value))) as img:
                value = np.asarray(img.convert("RGB"))
        except Exception as exc:  # Pillow raises several kinds for undecodable bytes
            raise ObsMapError(f"{key}: image bytes that do not decode ({type(exc).__name__}: {exc})") from None
    array = np.asarray(value)
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or array.shape[0] == 0 or array.shape[1] == 0:
        raise ObsMapError(f"{key}: an image is HWC with 1, 3 or 4 channels, got shape {tuple(array.shape)}")
    if array.shape[2] == 1:
        array = np.repeat(array, 3, axis=2)
    elif array.shape[2] == 4:
        array = array[:, :, :3]
    if np.issubdtype(array.dtype, np.floating):  # [0, 1] floats, as openpi's convert_to_uint8 takes them
        array = np.clip(np.nan_to_num(array) * 255.0, 0, 255).astype(np.uint8)
    elif array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(array)


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize an HWC uint8 image to fit ``height`` x ``width`` keeping its aspect ratio, centred on black.

    The scale is the one that makes the larger relative side fit; the resized image (bilinear) is placed at
    ``((height - h) // 2, (width - w) // 2)`` and the rest is zero. An image already of that size is returned
    unchanged.
    """
    from PIL import Image

    if height < 1 or width < 1:
        raise ObsMapError(f"resize_with_pad: size must be positive, got {height}x{width}")
    cur_h, cur_w = int(image.shape[0]), int(image.shape[1])
    if (cur_h, cur_w) == (height, width):
        return image
    ratio = max(cur_w / width, cur_h / height)
    new_h = min(height, max(1, int(cur_h / ratio)))
    new_w = min(width, max(1, int(cur_w / ratio)))
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), resample=Image.BILINEAR))
    out = np.zeros((height, width, image.shape[2]), dtype=np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    out[top:top + new_h, left:left + new_w] = resized
    return out


# -- building maps -------------------------------------------------------------------------------------------------
def _joints(arm: str, suffix: str = "") -> List[str]:
    return [f"{arm}.joint_{i}{suffix}" for i in range(1, 7)]


#: Our gripper's command range is [0, 0.8] rad of jaw opening (0 closed); openpi's DROID, ALOHA and LIBERO presets
#: take the gripper as [0, 1] (1 closed). Every preset maps one onto the other closed to closed: state
#: ``server = 1 - obs / 0.8``, action ``station = 0.8 - 0.8 * server``.
GRIPPER_RANGE = 0.8
#: openpi's gripper value that closes it.
OPENPI_GRIPPER_CLOSED = 1.0


def _gripper_state(arm: str) -> Dict[str, Any]:
    """Map the arm's jaw opening onto openpi's [0, 1] (1 closed)."""
    return {"key": f"{arm}.gripper.pos", "scale": -1 / GRIPPER_RANGE, "offset": 1.0}


def _gripper_action(arm: str) -> Dict[str, Any]:
    """Map openpi's [0, 1] gripper column (1 closed) onto the arm's [0, 0.8] jaw opening (0 closed)."""
    return {"key": f"{arm}.gripper", "scale": -GRIPPER_RANGE, "offset": GRIPPER_RANGE}

_DROID: Dict[str, Any] = {
    "prompt": "prompt",
    "state": {"observation/joint_position": [*_joints("right", ".pos"), 0.0],
              "observation/gripper_position": [_gripper_state("right")]},
    "images": {"observation/exterior_image_1_left": {"camera": "scene", "size": [224, 224]},
               "observation/wrist_image_left": {"camera": "wrist", "size": [224, 224]}},
    "actions": [*_joints("right"), None, _gripper_action("right")],
}

_PRESET_MAPPINGS: Dict[str, Dict[str, Any]] = {
    # DROID, openpi's pi05_droid_jointpos: one Franka arm (7 joints) and a [0, 1] gripper; our right arm's 6 joints
    # fill the first six, the seventh is sent as 0 and its action column ignored. Absolute joint positions.
    "droid_jointpos": {**_DROID, "action_space": "joint_position"},
    # DROID, openpi's stock checkpoints (pi0_droid, pi0_fast_droid, pi05_droid): the same keys, joint velocities.
    "droid": {**_DROID, "action_space": "joint_velocity"},
    # ALOHA (openpi's pi0_aloha): two arms of 6 joints and a gripper each, left then right; cameras nested under
    # "images" as CHW uint8 (the server fills the cameras it is not sent: cam_low, cam_left_wrist). Its output
    # transforms return absolute joint positions.
    "aloha": {
        "action_space": "joint_position",
        "prompt": "prompt",

        "state": {"state": [*_joints("left", ".pos"), _gripper_state("left"), *_joints("right", ".pos"),
                            _gripper_state("right")]},
        "images": {"images.cam_high": {"camera": "scene", "size": [224, 224], "layout": "chw"},
                   "images.cam_right_wrist": {"camera": "wrist", "size": [224, 224], "layout": "chw"}},
        "actions": [*_joints("left"), _gripper_action("left"), *_joints("right"), _gripper_action("right")],
    },
    # LIBERO (openpi's pi0_libero): a scene and a wrist image, an 8-vector state, 7 action columns (6 + gripper);
    # its actions are end-effector deltas, not joint targets.
    "libero": {
        "action_space": "delta",
        "prompt": "prompt",
        "state": {"observation/state": [*_joints("right", ".pos"), _gripper_state("right"), _gripper_state("right")]},
        "images": {"observation/image": {"camera": "scene", "size": [224, 224]},
                   "observation/wrist_image": {"camera": "wrist", "size": [224, 224]}},
        "actions": [*_joints("right"), _gripper_action("right")],
    },
}

#: Preset names accepted by :func:`load_obs_map` (``roboarena`` is built from the server's metadata).
PRESETS: Tuple[str, ...] = (*_PRESET_MAPPINGS, "roboarena")


def roboarena_obs_map(metadata: Mapping[str, Any]) -> ObsMap:
    """Build the DROID-shaped mapping a RoboArena server asks for in its metadata.

    ``image_resolution`` sets every image's size, ``n_external_cameras`` how many exterior images are sent (this
    station has one exterior camera, ``scene``), ``needs_wrist_camera`` whether ``wrist`` is, and
    ``action_space`` must be ``joint_position`` (every action is an absolute target here).
    """
    size = metadata.get("image_resolution", (224, 224))
    if (not isinstance(size, (list, tuple)) or len(size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in size)):
        raise ObsMapError(f"roboarena metadata: image_resolution must be [height, width], got {size!r}")
    n_external = metadata.get("n_external_cameras", 1)
    if not isinstance(n_external, int) or isinstance(n_external, bool) or n_external < 0:
        raise ObsMapError(f"roboarena metadata: n_external_cameras must be a count, got {n_external!r}")
    if n_external > 1:
        raise ObsMapError(f"roboarena server needs {n_external} external cameras; this station has 1 (scene)")
    space = metadata.get("action_space", "joint_position")
    if space != "joint_position":
        raise ObsMapError(f"roboarena server's action_space is {space!r}; this bridge serves joint_position only "
                          "(absolute joint targets)")
    images: Dict[str, Any] = {}
    if n_external:
        images["observation/exterior_image_0_left"] = {"camera": "scene", "size": list(size)}
    if metadata.get("needs_wrist_camera", True):
        images["observation/wrist_image_left"] = {"camera": "wrist", "size": list(size)}
    mapping = dict(_PRESET_MAPPINGS["droid_jointpos"], images=images)
    return obs_map_from_mapping(mapping, "roboarena")


def no_preset_named() -> ObsMapError:
    """Return the refusal of an openpi server served with no mapping: there is no default, the team names one."""
    return ObsMapError(f"no obs map named: name the preset that fits your server ({', '.join(PRESETS)}) or a YAML "
                       "mapping file (--obs-map NAME); droid_jointpos is openpi's pi05_droid_jointpos, droid its "
                       "stock DROID checkpoints (joint velocities, which this position-controlled station refuses)")


def load_obs_map(spec: Union[str, Path, ObsMap, Mapping[str, Any]]) -> ObsMap:
    """Return the mapping named by ``spec``: an :class:`ObsMap`, a preset name, a YAML file path or a mapping.

    ``roboarena`` needs the server's metadata: :class:`~strands_robots.client.openpi.OpenPIPolicy` builds it
    with :func:`roboarena_obs_map` once connected.
    """
    if isinstance(spec, ObsMap):
        return spec
    if isinstance(spec, Mapping):
        return obs_map_from_mapping(spec, "mapping")
    text = str(spec)
    if text in _PRESET_MAPPINGS:
        return obs_map_from_mapping(_PRESET_MAPPINGS[text], text)
    if text == "roboarena":
        raise ObsMapError("obs map 'roboarena' is built from the server's metadata (OpenPIPolicy does it)")
    path = Path(text)
    if not path.is_file():
        raise ObsMapError(f"obs map {text!r} is neither a preset ({', '.join(PRESETS)}) nor a readable file")
    import yaml

    raw = path.read_bytes()
    if len(raw) > MAX_MAP_FILE_BYTES:
        raise ObsMapError(f"obs map file {text}: {len(raw)} bytes, more than {MAX_MAP_FILE_BYTES}")
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ObsMapError(f"obs map file {text}: not YAML ({first})") from None
    if not isinstance(data, Mapping):
        raise ObsMapError(f"obs map file {text}: the top level must be a mapping")
    return obs_map_from_mapping(data, path.name)


_TOP_KEYS = frozenset({"action_space", "prompt", "state", "images", "actions", "extra"})
#: What a mapping's ``action_space`` may say (``client.policy_spec.ACTION_SPACES``).
ACTION_SPACES = ("joint_position", "joint_velocity", "delta")


def obs_map_from_mapping(data: Mapping[str, Any], name: str) -> ObsMap:
    """Build an :class:`ObsMap` from the YAML form (see the module docstring); errors name the entry."""
    unknown = sorted(set(map(str, data)) - _TOP_KEYS)
    if unknown:
        raise ObsMapError(f"obs map {name!r}: unknown keys {unknown}; allowed: {sorted(_TOP_KEYS)}")
    prompt = data.get("prompt", "prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise ObsMapError(f"obs map {name!r}: prompt must be a server key or null, got {prompt!r}")
    state: Dict[str, Tuple[StateEntry, ...]] = {}
    for server_key, entries in _mapping(data.get("state"), name, "state").items():
        if not isinstance(entries, (list, tuple)) or not entries:
            raise ObsMapError(f"obs map {name!r}: state.{server_key} must be a non-empty list")
        state[str(server_key)] = tuple(_state_entry(e, f"state.{server_key}[{i}]", name)
                                       for i, e in enumerate(entries))
    images: Dict[str, ImageEntry] = {}
    for server_key, entry in _mapping(data.get("images"), name, "images").items():
        images[str(server_key)] = _image_entry(entry, f"images.{server_key}", name)
    actions_raw = data.get("actions")
    if not isinstance(actions_raw, (list, tuple)) or not actions_raw:
        raise ObsMapError(f"obs map {name!r}: actions must be a non-empty list (one entry per action column)")
    actions = tuple(_action_entry(e, f"actions[{i}]", name) for i, e in enumerate(actions_raw))
    keys = [a.key for a in actions if a is not None]
    if not keys:
        raise ObsMapError(f"obs map {name!r}: actions ignore every column")
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ObsMapError(f"obs map {name!r}: actions command {dupes} more than once")
    extra = dict(_mapping(data.get("extra"), name, "extra"))
    space = data.get("action_space", "joint_position")
    if space not in ACTION_SPACES:
        raise ObsMapError(f"obs map {name!r}: action_space must be one of {', '.join(ACTION_SPACES)}, got {space!r}")
    return ObsMap(name=name, state=state, images=images, actions=actions, prompt=prompt, extra=extra,
                  action_space=space)


def _mapping(value: Any, name: str, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ObsMapError(f"obs map {name!r}: {what} must be a mapping, got {type(value).__name__}")
    return value


def _number(value: Any, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ObsMapError(f"obs map {name!r}: {where} must be a finite number, got {value!r}")
    return float(value)


def _key(value: Any, where: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ObsMapError(f"obs map {name!r}: {where} must be a station key, got {value!r}")
    return value


def _state_entry(entry: Any, where: str, name: str) -> StateEntry:
    if isinstance(entry, (int, float)) and not isinstance(entry, bool):
        return StateEntry(key=None, constant=_number(entry, where, name))
    if isinstance(entry, str):
        return StateEntry(key=_key(entry, where, name))
    if isinstance(entry, Mapping):
        extra = sorted(set(map(str, entry)) - {"key", "scale", "offset"})
        if extra:
            raise ObsMapError(f"obs map {name!r}: {where} has unknown keys {extra} (key, scale, offset)")
        return StateEntry(key=_key(entry.get("key"), f"{where}.key", name),
                          scale=_number(entry.get("scale", 1.0), f"{where}.scale", name),
                          offset=_number(entry.get("offset", 0.0), f"{where}.offset", name))
    raise ObsMapError(f"obs map {name!r}: {where} must be a key, a number or {{key, scale, offset}}, got {entry!r}")


def _image_entry(entry: Any, where: str, name: str) -> ImageEntry:
    if isinstance(entry, str):
        entry = {"camera": entry}
    if not isinstance(entry, Mapping):
        raise ObsMapError(f"obs map {name!r}: {where} must be {{camera, size, layout}}, got {entry!r}")
    extra = sorted(set(map(str, entry)) - {"camera", "size", "layout"})
    if extra:
        raise ObsMapError(f"obs map {name!r}: {where} has unknown keys {extra} (camera, size, layout)")
    camera = _key(entry.get("camera"), f"{where}.camera", name)
    if camera.endswith(".image"):
        camera = camera[: -len(".image")]
    size = entry.get("size")
    if size is not None:
        if (not isinstance(size, (list, tuple)) or len(size) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_IMAGE_SIDE
                           for v in size)):
            raise ObsMapError(f"obs map {name!r}: {where}.size must be [height, width], each 1..{MAX_IMAGE_SIDE}, "
                              f"got {size!r}")
        size = (int(size[0]), int(size[1]))
    layout = entry.get("layout", "hwc")
    if layout not in ("hwc", "chw"):
        raise ObsMapError(f"obs map {name!r}: {where}.layout must be hwc or chw, got {layout!r}")
    return ImageEntry(camera=camera, size=size, layout=layout)


def _action_entry(entry: Any, where: str, name: str) -> Optional[ActionEntry]:
    if entry is None:
        return None
    if isinstance(entry, str):
        return ActionEntry(key=_key(entry, where, name))
    if isinstance(entry, Mapping):
        extra = sorted(set(map(str, entry)) - {"key", "scale", "offset"})
        if extra:
            raise ObsMapError(f"obs map {name!r}: {where} has unknown keys {extra} (key, scale, offset)")
        return ActionEntry(key=_key(entry.get("key"), f"{where}.key", name),
                           scale=_number(entry.get("scale", 1.0), f"{where}.scale", name),
                           offset=_number(entry.get("offset", 0.0), f"{where}.offset", name))
    raise ObsMapError(f"obs map {name!r}: {where} must be a station key, null or {{key, scale, offset}}, "
                      f"got {entry!r}")
