"""Observations and action chunks <-> their protobuf messages (the policy session's payload).

Used by both ends of a session: the Evaluation Client (this package, no other strands_robots import) and the
station's link (``station_link/link.py``). numpy arrays go as row-major ``Tensor`` packed in their own dtype
(little-endian bytes: an image stays one byte per value); nested lists go as doubles. A camera frame the station
encoded (:class:`~strands_robots.client.images.EncodedImage`, JPEG or PNG) goes as ``Value.image`` and comes
back decoded as a ``(height, width, 3)`` uint8 array of the declared size (numpy and Pillow). numpy is used when
it is installed: without it, tensors come back as nested lists (and an encoded image is refused).
"""

from __future__ import annotations

import math
import sys
from array import array
from typing import Any, Dict, Iterable, List, Mapping, Sequence

from strands_robots.wire.proto import policy_session_pb2 as _ps

try:  # optional: arrays come back as numpy arrays when numpy is there
    import numpy as _np
except ImportError:  # pragma: no cover - the client venv test covers it
    _np = None
try:  # camera frames: numpy and Pillow
    from strands_robots.client import images as _images
except ImportError:  # pragma: no cover
    _images = None


class CodecError(ValueError):
    """A value that cannot go on the wire; the message names the key."""


# Packed dtypes and the array module's typecode of the same size (for decoding without numpy).
_PACKED = {"uint8": "B", "int8": "b", "uint16": "H", "int16": "h", "int32": "i", "int64": "q",
           "float32": "f", "float64": "d"}
_BOOL_AS = "uint8"


def _shape_of(value: Sequence) -> List[int]:
    shape = []
    while isinstance(value, (list, tuple)):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def _flatten(value: Any, out: List[float]) -> None:
    if isinstance(value, (list, tuple)):
        for v in value:
            _flatten(v, out)
    else:
        out.append(float(value))


def _fill(v: Any, key: str, value: Any) -> None:
    """Set the ``Value`` ``v`` (in its map already: no copy of a frame's bytes) to ``value``."""
    if _images is not None and isinstance(value, _images.EncodedImage):
        v.image.format = value.format
        v.image.data = value.data
        v.image.width, v.image.height, v.image.channels = value.width, value.height, value.channels
    elif isinstance(value, bool) or (_np is not None and isinstance(value, _np.bool_)):
        v.flag = bool(value)
    elif isinstance(value, (int, float)) or (_np is not None and isinstance(value, (_np.integer, _np.floating))):
        v.number = float(value)
    elif isinstance(value, str):
        v.text = value
    elif _np is not None and isinstance(value, _np.ndarray):
        if value.dtype.kind not in "biuf":
            raise CodecError(f"observation[{key!r}]: arrays must be numeric, got dtype {value.dtype}")
        name = _BOOL_AS if value.dtype.kind == "b" else value.dtype.name
        if name not in _PACKED:
            name = "float64"
        v.tensor.shape.extend(int(d) for d in value.shape)
        v.tensor.dtype = name
        v.tensor.data = _np.ascontiguousarray(value, dtype=_np.dtype(name).newbyteorder("<")).tobytes()
    elif isinstance(value, (list, tuple)):
        flat: List[float] = []
        try:
            _flatten(value, flat)
        except (TypeError, ValueError) as exc:
            raise CodecError(f"observation[{key!r}]: a list must hold numbers only ({exc})") from None
        shape = _shape_of(value)
        if math.prod(shape) != len(flat):
            raise CodecError(f"observation[{key!r}]: a ragged nested list has no shape")
        v.tensor.shape.extend(shape)
        v.tensor.values.extend(flat)
    else:
        raise CodecError(f"observation[{key!r}]: cannot send a {type(value).__name__}")


def observation_to_pb(observation: Mapping[str, Any], skip_unsupported: bool = False) -> Any:
    """``{key: number | str | bool | array}`` -> ``pb.Observation``.

    :param skip_unsupported: leave out entries of other types (None, objects) instead of raising.
    """
    msg = _ps.Observation()
    for key, value in observation.items():
        name = str(key)
        if name in msg.values:  # keys alike as text: the last one wins, whole
            del msg.values[name]
        try:
            _fill(msg.values[name], name, value)
        except CodecError:
            del msg.values[name]  # nothing half-set stays behind
            if skip_unsupported:
                continue
            raise
    return msg


def _unpack(t: Any) -> Any:
    """Return the flat values of a packed tensor: a numpy array, or a list without numpy."""
    if _np is not None:
        return _np.frombuffer(t.data, dtype=_np.dtype(t.dtype).newbyteorder("<"))
    flat = array(_PACKED[t.dtype])
    if flat.itemsize != _np_itemsize(t.dtype):
        raise CodecError(f"tensor dtype {t.dtype!r}: this platform's array typecode has another size")
    flat.frombytes(t.data)
    if sys.byteorder == "big":
        flat.byteswap()
    return flat.tolist()


def _np_itemsize(dtype: str) -> int:
    return {"uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "int32": 4, "int64": 8, "float32": 4,
            "float64": 8}[dtype]


def _tensor_from_pb(t: Any) -> Any:
    shape = tuple(t.shape)
    packed = bool(t.dtype)
    if packed:
        if t.dtype not in _PACKED:
            raise CodecError(f"tensor dtype {t.dtype!r} is not one of {', '.join(_PACKED)}")
        count = math.prod(shape) if shape else 1
        if len(t.data) != count * _np_itemsize(t.dtype):
            raise CodecError(f"tensor of shape {list(shape)} and dtype {t.dtype} carries {len(t.data)} bytes, "
                             f"not {count * _np_itemsize(t.dtype)}")
    if _np is not None:
        flat = _unpack(t) if packed else _np.asarray(t.values, dtype=float)
        return flat.reshape(shape).copy() if packed else flat.reshape(shape)
    values = _unpack(t) if packed else list(t.values)
    if not shape:
        return values[0] if values else 0.0

    def build(offset: int, dims: Sequence[int]) -> Any:
        if len(dims) == 1:
            return values[offset:offset + dims[0]]
        step = math.prod(dims[1:])
        return [build(offset + i * step, dims[1:]) for i in range(dims[0])]

    return build(0, shape)


def _image_from_pb(key: str, image: Any) -> Any:
    if _images is None:
        raise CodecError(f"observation[{key!r}]: a camera frame needs numpy and Pillow to decode")
    encoded = _images.EncodedImage(image.format, bytes(image.data), int(image.width), int(image.height),
                                   int(image.channels))
    try:
        return _images.decode_image(encoded, what=f"observation[{key!r}]")
    except _images.ImageCodecError as exc:
        raise CodecError(str(exc)) from None


def observation_from_pb(msg: Any) -> Dict[str, Any]:
    """``pb.Observation`` -> ``{key: float | str | bool | array}``."""
    out: Dict[str, Any] = {}
    for key, v in msg.values.items():
        kind = v.WhichOneof("kind")
        if kind == "number":
            out[key] = v.number
        elif kind == "text":
            out[key] = v.text
        elif kind == "flag":
            out[key] = v.flag
        elif kind == "tensor":
            out[key] = _tensor_from_pb(v.tensor)
        elif kind == "image":
            out[key] = _image_from_pb(key, v.image)
        else:
            out[key] = None
    return out


def action_chunk_to_pb(chunk: Iterable[Mapping[str, float]]) -> Any:
    """Convert a sequence of ``{actuator_key: value}`` to ``pb.ActionChunk``; CodecError names step and key."""
    if isinstance(chunk, Mapping):
        raise CodecError("an action chunk is a sequence of {key: value} mappings, got a single mapping")
    msg = _ps.ActionChunk()
    for index, action in enumerate(chunk):
        if not isinstance(action, Mapping):
            raise CodecError(f"action chunk[{index}]: each action is a {{key: value}} mapping, "
                             f"got {type(action).__name__}")
        a = msg.actions.add()
        for key, value in action.items():
            try:
                a.values[str(key)] = float(value)
            except (TypeError, ValueError):
                raise CodecError(f"action chunk[{index}][{key!r}]: not a number: {value!r}") from None
    return msg


def action_chunk_from_pb(msg: Any) -> List[Dict[str, float]]:
    """``pb.ActionChunk`` -> a list of ``{actuator_key: value}``."""
    return [dict(a.values) for a in msg.actions]
