"""Serve a team's unchanged openpi policy server through the relay: :class:`OpenPIPolicy`.

    from strands_robots.client import EvaluationClient
    from strands_robots.client.openpi import OpenPIPolicy, serve_openpi
    policy = OpenPIPolicy("ws://127.0.0.1:8000", obs_map="droid_jointpos")    # a preset or a YAML mapping file
    final = serve_openpi(EvaluationClient(relay, token=...), job_id, policy)

The wire is openpi's websocket protocol as its server (``openpi_server.WebsocketPolicyServer``) speaks it:
binary frames of msgpack, numpy arrays as maps with bytes keys (``{b"__ndarray__": True, b"data", b"dtype",
b"shape"}``; numpy scalars ``{b"__npgeneric__": True, b"data", b"dtype"}``); on connect the server sends its
metadata (kept as :attr:`OpenPIPolicy.metadata`); then strict lock step, one observation for one answer
``{"actions": [H, D], ...}``. A server error arrives as a text frame carrying its traceback (then close 1011):
the episode ends with that error named (:class:`OpenPIServerError`, a policy fault). A server that dies ends the
running episode (:class:`OpenPIConnectionLost`) and the next episode's ``reset`` connects again.

What the bridge refuses, each with an :class:`OpenPIError` naming it (the episode ends with that error):

- a frame nobody asked for (a server answering one request twice, or speaking between requests): the lock step
  has no request ids, so an extra frame would pair every later answer with the wrong observation. It is looked
  for right after each answer and before each request, so it is caught at the latest at the next exchange;
- a redirect: the address the team named is the one the job's provenance records and the one its ``Api-Key``
  was given for, so actions from another address are refused (name the final address instead);
- ``actions`` that are not real numbers (complex, strings, booleans, objects): refused by
  :meth:`ObsMap.chunk <strands_robots.client.obs_map.ObsMap.chunk>` naming the dtype, never coerced.

A station's preflight (before a job's first lease, ``client.policy.Policy``) reaches the bridge as an episode's
first step does: a ``reset`` and one ``act``, so the server answers one observation of the arms as they stand;
the station checks the answer and never applies it. A server that raises there fails the job before any arm
moves, with its error.

The RoboArena variant (``variant="roboarena"``, or chosen when the metadata names ``action_space`` and
``n_external_cameras``) adds ``"endpoint": "infer" | "reset"`` to every request, sends a reset at each
episode's start (answered by the text frame ``reset successful``) and builds its mapping from the metadata
(image_resolution, needs_wrist_camera, n_external_cameras, action_space); a server whose metadata sets
``needs_session_id`` also gets a ``session_id`` (one per episode) in every request.

The codec here is this package's own. Needs msgpack, websockets, numpy and Pillow:
``pip install strands-robots-client[openpi]``.
"""

from __future__ import annotations

import json
import logging
import select
import ssl
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Union

import msgpack
import numpy as np

from strands_robots.client.malloc_tuning import keep_freed_buffers
from strands_robots.client.obs_map import OPENPI_GRIPPER_CLOSED, ObsMap, ObsMapError, load_obs_map, \
    no_preset_named, roboarena_obs_map
from strands_robots.client.policy import Policy
from strands_robots.client.policy_spec import MAX_METADATA_JSON, ActionRange, CameraNeed, PolicySpec

__all__ = ["OpenPIPolicy", "OpenPIError", "OpenPIServerError", "OpenPIConnectionLost", "pack", "unpack",
           "serve_openpi", "VARIANTS"]

_log = logging.getLogger("strands_robots.client.openpi")

#: Largest frame accepted from the server (openpi itself has no limit; a bound is ours).
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
#: Longest server traceback kept (the station cuts what it records further).
MAX_TRACEBACK_CHARS = 8000
#: The RoboArena server's answer to a reset request.
ROBOARENA_RESET_REPLY = "reset successful"
VARIANTS = ("openpi", "roboarena")
#: An openpi server's gripper column runs from open to closed over [0, 1] (DROID, LIBERO, ALOHA normalised).
OPENPI_GRIPPER_RANGE = (0.0, 1.0)
#: How long a request waits for the background reader to parse bytes already on the socket (a check for a frame
#: nobody asked for; a keepalive ping is all that ever waits here).
UNSOLICITED_CHECK_S = 0.1
_NDARRAY = b"__ndarray__"
_NPGENERIC = b"__npgeneric__"
#: Array dtype kinds a frame may carry (openpi's own codec refuses objects, void and complex: so does this one).
_WIRE_KINDS = frozenset("biufSUMm")


class OpenPIError(RuntimeError):
    """The openpi server could not give this episode its actions; the episode ends with this error."""


class OpenPIServerError(OpenPIError):
    """The server raised: the message is its error (the traceback's last line); ``traceback`` has it whole."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message)
        self.traceback = traceback


class OpenPIConnectionLost(OpenPIError):
    """The server closed the connection or could not be reached; the next episode's ``reset`` reconnects."""


# -- the msgpack-numpy codec (openpi's wire form) -------------------------------------------------------------
def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "OVUc":
            raise TypeError(f"an array of dtype {obj.dtype} cannot go to an openpi server")
        # the array's own bytes (a C-order view, as tobytes() would copy them): msgpack copies them once, into the frame
        data = memoryview(np.ascontiguousarray(obj).reshape(-1).view(np.uint8))
        return {_NDARRAY: True, b"data": data, b"dtype": obj.dtype.str, b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return {_NPGENERIC: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"{type(obj).__name__} cannot go to an openpi server")


def _decode(obj: Dict[Any, Any]) -> Any:
    if _NDARRAY in obj:
        dtype = np.dtype(obj[b"dtype"])
        if dtype.kind not in _WIRE_KINDS:
            raise ValueError(f"the openpi server sent an array of dtype {dtype} (openpi's codec carries no complex, "
                             "object or void arrays)")
        shape = tuple(int(v) for v in obj[b"shape"])
        return np.frombuffer(obj[b"data"], dtype=dtype).reshape(shape)
    if _NPGENERIC in obj:
        dtype = np.dtype(obj[b"dtype"])
        if dtype.kind not in _WIRE_KINDS:
            raise ValueError(f"the openpi server sent a scalar of dtype {dtype} (openpi's codec carries no complex, "
                             "object or void values)")
        return dtype.type(obj[b"data"])
    return obj


def pack(obj: Any) -> bytes:
    """Encode ``obj`` (dicts, lists, str, numbers, numpy arrays and scalars) as openpi's msgpack frame."""
    return msgpack.packb(obj, default=_encode, use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Decode one openpi msgpack frame (arrays come back as read-only numpy arrays)."""
    return msgpack.unpackb(data, object_hook=_decode, raw=False, strict_map_key=False)


def _error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "the server sent an empty error"


# -- the policy ------------------------------------------------------------------------------------------------
class OpenPIPolicy(Policy):
    """A :class:`~strands_robots.client.policy.Policy` whose chunks come from an openpi websocket policy server.

    :param url: ``ws://host:port`` of the server (openpi's default port is 8000).
    :param obs_map: a preset name (``droid_jointpos``, ``droid``, ``aloha``, ``libero``, ``roboarena``), a YAML
        mapping file, a mapping or an :class:`~strands_robots.client.obs_map.ObsMap` (see that module for the
        format). There is no default: None is taken only for a RoboArena server (its metadata names the
        mapping); any other server is refused with :class:`~strands_robots.client.obs_map.ObsMapError` naming
        the presets.
    :param variant: ``openpi``, ``roboarena`` or None (RoboArena when the metadata looks like its own).
    :param api_key: sent as ``Authorization: Api-Key ...`` when given (as openpi's client does).
    :param connect_timeout_s: how long connecting (and reading the metadata) may take, retried until then.
    :param infer_timeout_s: how long one answer may take.
    :param max_frame_bytes: the largest websocket frame accepted from the server.
    :param connect: connect now (the metadata is then known at once); False: at the first ``reset``.
    """

    def __init__(self, url: str, obs_map: Union[str, Mapping[str, Any], ObsMap, None] = None, *,
                 variant: Optional[str] = None, api_key: Optional[str] = None, connect_timeout_s: float = 10.0,
                 infer_timeout_s: float = 30.0, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 connect: bool = True) -> None:
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise ValueError(f"openpi server address must be ws://HOST:PORT (or wss://), got {url!r}")
        if variant is not None and variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS} or None, got {variant!r}")
        for label, value in (("connect_timeout_s", connect_timeout_s), ("infer_timeout_s", infer_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{label} must be > 0, got {value!r}")
        keep_freed_buffers()  # each step's frames (msgpack, websocket) reuse the heap, not new pages
        self.url = url
        self._map_spec = "roboarena" if variant == "roboarena" and obs_map is None else obs_map
        self._variant_arg = variant
        self.obs_map: Optional[ObsMap] = None
        if self._map_spec not in (None, "roboarena"):
            self.obs_map = load_obs_map(self._map_spec)  # a bad mapping fails here, before anything connects
        elif self._map_spec is None and variant == "openpi":
            raise no_preset_named()
        self.variant: str = variant or "openpi"
        self.api_key = api_key
        self.connect_timeout_s = float(connect_timeout_s)
        self.infer_timeout_s = float(infer_timeout_s)
        self.max_frame_bytes = int(max_frame_bytes)
        #: The server's metadata frame (the last connection's).
        self.metadata: Dict[str, Any] = {}
        #: The last answer's timing fields (``policy_timing``, ``server_timing``) as the server sent them.
        self.last_timing: Dict[str, Any] = {}
        self.connections = 0
        self._ws: Any = None
        self._prompt: Optional[str] = None
        self._horizon = 0
        self._session_id = ""
        if connect:
            self._connect()

    # -- Policy -------------------------------------------------------------------------------------------------
    def reset(self, task: Any) -> None:
        """Start an episode: connect again if the connection is gone; RoboArena: send its reset."""
        self._prompt = _field(task, "instruction")
        self._horizon = int(_field(self.episode, "action_horizon") or _field(task, "action_horizon") or 0)
        if not self._alive():
            self._drop()
            self._connect()
        offered = tuple(_field(self.episode, "action_keys") or _field(task, "action_keys") or ())
        if offered:
            missing = [k for k in self.obs_map.action_keys if k not in offered]
            if missing:
                raise ObsMapError(f"obs map {self.obs_map.name!r} commands {missing}, which this episode does not "
                                  f"offer (its keys: {', '.join(offered)})")
        self._session_id = str(uuid.uuid4())
        if self.variant == "roboarena":
            request: Dict[str, Any] = {"endpoint": "reset"}
            if self.metadata.get("needs_session_id"):
                request["session_id"] = self._session_id
            reply = self._exchange(request, "reset", text_ok=ROBOARENA_RESET_REPLY)
            if reply != ROBOARENA_RESET_REPLY:
                raise OpenPIError(f"roboarena server {self.url} answered a reset with a frame that is not "
                                  f"{ROBOARENA_RESET_REPLY!r}")

    def act(self, observation: Mapping[str, Any]) -> List[Dict[str, float]]:
        """Send the mapped observation, return the answer's ``actions`` as the station's chunk (in order)."""
        if self.obs_map is None:
            raise OpenPIError(f"openpi server {self.url}: act before the first reset (nothing connected yet)")
        request = self.obs_map.request(observation, self._prompt)
        if self.variant == "roboarena":
            request["endpoint"] = "infer"
            if self.metadata.get("needs_session_id"):
                request["session_id"] = self._session_id
        reply = self._exchange(request, "infer")
        if not isinstance(reply, Mapping) or "actions" not in reply:
            keys = sorted(map(str, reply)) if isinstance(reply, Mapping) else type(reply).__name__
            raise OpenPIError(f"openpi server {self.url} answered without 'actions' (got {keys})")
        self.last_timing = {k: reply[k] for k in ("policy_timing", "server_timing") if k in reply}
        chunk = self.obs_map.chunk(reply["actions"])
        return chunk[: self._horizon] if self._horizon > 0 else chunk

    def resume(self, observation: Mapping[str, Any]) -> None:
        """Continue after a takeover: openpi servers keep no episode state, the next ``act`` carries on."""

    def spec(self) -> PolicySpec:
        """Return what this policy needs of a station, from the mapping and the server's metadata (connects if needed).

        The actuator keys and observation keys the mapping names; its cameras (any size when the mapping
        resizes them, else the metadata's ``image_resolution`` when it names one); the metadata's
        ``control_frequency`` when it names one; and each gripper's commanded range: openpi's grippers are
        [0, 1], 1 closed (:data:`~strands_robots.client.obs_map.GRIPPER_RANGE`), mapped by the column's scale
        and offset, with the value that closes it; the mapping's action space. The metadata itself travels with
        the spec (the job's provenance keeps it).
        """
        if self.obs_map is None:
            self._connect()
        assert self.obs_map is not None
        resolution = self.metadata.get("image_resolution")
        fixed = (tuple(int(v) for v in resolution) if isinstance(resolution, (list, tuple)) and len(resolution) == 2
                 and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in resolution) else (0, 0))
        cameras = {}
        for entry in self.obs_map.images.values():
            need = (0, 0) if entry.size is not None else fixed
            cameras.setdefault(entry.camera, CameraNeed(entry.camera, *need))
        rate = self.metadata.get("control_frequency", 0.0)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 or rate != rate:
            rate = 0.0
        lo, hi = OPENPI_GRIPPER_RANGE
        ranges = tuple(ActionRange(a.key, *sorted((a.scale * lo + a.offset, a.scale * hi + a.offset)),
                                   closed=a.scale * OPENPI_GRIPPER_CLOSED + a.offset)
                       for a in self.obs_map.actions if a is not None and a.key.rsplit(".", 1)[-1] == "gripper")
        observed = tuple(dict.fromkeys(e.key for entries in self.obs_map.state.values() for e in entries
                                       if e.key is not None))
        metadata: Dict[str, Any] = self.metadata
        size = len(json.dumps(metadata, sort_keys=True, default=str))
        if size > MAX_METADATA_JSON:  # kept whole in the log; the spec says it was left out, and why
            metadata = {"omitted": f"the server's metadata is {size} characters of JSON, more than "
                                   f"{MAX_METADATA_JSON}", "keys": sorted(map(str, self.metadata))[:64]}
        return PolicySpec(action_keys=self.obs_map.action_keys, action_dim=len(self.obs_map.actions),
                          observation_keys=observed, cameras=tuple(cameras.values()), control_frequency_hz=float(rate),
                          action_ranges=ranges, source=f"{self.variant} server {self.url}, obs map {self.obs_map.name}",
                          metadata=metadata, action_space=self.obs_map.action_space)

    def close(self) -> None:
        """Close the connection to the server."""
        self._drop()

    # -- the connection ---------------------------------------------------------------------------------------
    def _open(self) -> bool:
        if self._ws is None:
            return False
        from websockets.protocol import State

        return self._ws.protocol.state is State.OPEN

    def _alive(self) -> bool:
        """Whether the connection is open and the server still answers a ping within ``connect_timeout_s``.

        A server killed a moment ago leaves the connection looking open until its close is read; the ping makes the
        episode start on a live server or on a new connection (or fail there), not at its first inference.
        """
        if not self._open():
            return False
        try:
            return bool(self._ws.ping().wait(self.connect_timeout_s))
        except Exception:  # the connection broke while pinging: connect again
            return False

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # already broken: nothing more to release
                pass

    def _connect(self) -> None:
        """Connect (retrying until ``connect_timeout_s``), read the metadata frame, settle variant and mapping."""
        from websockets.exceptions import InvalidHandshake, InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.05
        while True:
            left = deadline - time.monotonic()
            try:
                ws = connect(self.url, compression=None, max_size=self.max_frame_bytes, open_timeout=max(0.1, left),
                             additional_headers=headers, close_timeout=2.0)
                ws.__enter__()  # held across calls (closed by _drop), as a context manager would hold it
                break
            except InvalidStatus as exc:  # a websockets that does not follow redirects shows them here
                location = exc.response.headers.get("Location") if exc.response.status_code in _REDIRECTS else None
                if location is not None:
                    raise self._redirect_refused(location, exc.response.status_code) from None
                if time.monotonic() + delay >= deadline:
                    raise OpenPIConnectionLost(f"openpi server {self.url} cannot be reached within "
                                               f"{self.connect_timeout_s:g} s ({type(exc).__name__}: {exc})") from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except (OSError, TimeoutError, InvalidHandshake, WebSocketException) as exc:
                if time.monotonic() + delay >= deadline:
                    raise OpenPIConnectionLost(f"openpi server {self.url} cannot be reached within "
                                               f"{self.connect_timeout_s:g} s ({type(exc).__name__}: {exc})") from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        final = _handshake_address(ws, self.url)
        if final is not None:  # websockets followed a redirect: nothing is sent to where it led
            ws.close()
            raise self._redirect_refused(final)
        try:
            first = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        except (TimeoutError, WebSocketException, OSError) as exc:
            ws.close()
            raise OpenPIConnectionLost(f"openpi server {self.url} sent no metadata frame ({type(exc).__name__}: "
                                       f"{exc})") from None
        if isinstance(first, str):
            ws.close()
            raise OpenPIServerError(_error_line(first), first[-MAX_TRACEBACK_CHARS:])
        try:
            metadata = unpack(first)
        except Exception as exc:
            ws.close()
            raise OpenPIError(f"openpi server {self.url}: the metadata frame is not msgpack ({exc})") from None
        if not isinstance(metadata, dict):
            ws.close()
            raise OpenPIError(f"openpi server {self.url}: the metadata frame is a {type(metadata).__name__}, "
                              "not a map")
        self._ws = ws
        self.connections += 1
        if self.connections > 1 and metadata != self.metadata:
            _log.warning("openpi server %s: metadata changed on reconnecting: %r", self.url, metadata)
        self.metadata = metadata
        if self._variant_arg is None:
            self.variant = "roboarena" if {"action_space", "n_external_cameras"} <= set(metadata) else "openpi"
        if self.obs_map is None or self._map_spec in (None, "roboarena"):
            if self.variant == "roboarena" and self._map_spec in (None, "roboarena"):
                self.obs_map = roboarena_obs_map(metadata)
            elif self._map_spec is None:
                self._drop()
                raise no_preset_named()
            else:
                raise ObsMapError("obs map 'roboarena' needs a RoboArena server (its metadata names "
                                  "action_space and n_external_cameras)")
        _log.info("openpi server %s connected (%s, obs map %s); metadata %r", self.url, self.variant,
                  self.obs_map.name, metadata)

    def _redirect_refused(self, location: str, status: Optional[int] = None) -> OpenPIError:
        how = f" (HTTP {status})" if status else ""
        return OpenPIError(f"openpi server {self.url} redirected to {location}{how}: redirects are refused (the job "
                           f"records the address you named, and that address is the one that must answer); give "
                           f"the final address")

    def _unsolicited(self, what: str, wait: bool) -> None:
        """Raise when the server sent a frame nobody asked for (the lock step is broken; the connection is closed).

        ``wait``: bytes already on the socket get :data:`UNSOLICITED_CHECK_S` to be parsed (before a request, so an
        extra answer already received is never taken for the answer to the next observation).
        """
        from websockets.exceptions import ConnectionClosed, WebSocketException

        timeout = 0.0
        if wait:
            time.sleep(0)  # let the connection's reader thread queue what it already read off the socket
            sock = getattr(self._ws, "socket", None)
            try:
                if sock is not None and select.select([sock], [], [], 0.0)[0]:
                    timeout = UNSOLICITED_CHECK_S
            except (OSError, ValueError):  # the socket is gone: the request finds that out and says so
                pass
        try:
            extra = self._ws.recv(timeout=timeout)
        except TimeoutError:
            return
        except (ConnectionClosed, WebSocketException, OSError):  # closed meanwhile: the exchange says so
            return
        self._drop()
        kind = (f"a text frame ({_error_line(extra)[:200]!r})" if isinstance(extra, str)
                else f"a binary frame of {len(extra)} bytes")
        raise OpenPIError(f"openpi server {self.url} sent {kind} nobody asked for, {what}: it broke openpi's lock "
                          "step (one answer per request), so its answers can no longer be paired with their "
                          "observations; the connection is closed and the next episode reconnects")

    def _exchange(self, request: Mapping[str, Any], what: str, text_ok: Optional[str] = None) -> Any:
        """One lock-step round trip; a text frame is the server's error unless it is ``text_ok``.

        A frame the server sent unasked (before the request, or right behind its answer) ends it instead.
        """
        from websockets.exceptions import ConnectionClosed, WebSocketException

        if self._ws is None:  # lost earlier in this episode: that episode has ended with the reason
            raise OpenPIConnectionLost(f"openpi server {self.url}: not connected (the connection was lost earlier in "
                                       "this episode); the next episode's reset reconnects")
        frame = pack(dict(request))
        self._unsolicited(f"before the {what} request", wait=True)
        try:
            self._ws.send(frame)
            reply = self._ws.recv(timeout=self.infer_timeout_s)
        except TimeoutError:
            self._drop()
            raise OpenPIConnectionLost(f"openpi server {self.url} did not answer {what} within "
                                       f"{self.infer_timeout_s:g} s; the next episode reconnects") from None
        except (ConnectionClosed, WebSocketException, OSError) as exc:
            self._drop()
            raise OpenPIConnectionLost(f"openpi server {self.url} closed the connection during {what} "
                                       f"({_closed_detail(exc)}); the next episode reconnects") from None
        if isinstance(reply, str):
            if text_ok is not None and reply.strip() == text_ok:
                self._unsolicited(f"behind its answer to {what}", wait=False)
                return text_ok
            self._drop()
            message = f"{_error_line(reply)} (openpi server {self.url}, during {what})"
            _log.error("openpi server %s raised during %s:\n%s", self.url, what, reply[-MAX_TRACEBACK_CHARS:])
            raise OpenPIServerError(message, reply[-MAX_TRACEBACK_CHARS:])
        self._unsolicited(f"behind its answer to {what}", wait=False)
        try:
            return unpack(reply)
        except Exception as exc:
            self._drop()
            raise OpenPIError(f"openpi server {self.url} answered {what} with a frame that does not decode "
                              f"({type(exc).__name__}: {exc})") from None


_REDIRECTS = (300, 301, 302, 303, 307, 308)


def _handshake_address(ws: Any, url: str) -> Optional[str]:
    """Return where the handshake of ``ws`` went when that is not ``url`` (a redirect was followed), else None."""
    from websockets.uri import parse_uri

    asked = parse_uri(url)
    request = getattr(ws, "request", None)
    if request is None:
        return None
    host_header = str(request.headers.get("Host", ""))
    host, _, port = host_header.rpartition(":") if not host_header.endswith("]") else (host_header, "", "")
    if not host or not port.isdigit():
        host, port = host_header, str(443 if asked.secure else 80)
    host = host.strip("[]").lower()
    secure = isinstance(getattr(ws, "socket", None), ssl.SSLSocket)
    if (secure, host, int(port), request.path) == (asked.secure, asked.host.strip("[]").lower(), asked.port,
                                                    asked.resource_name):
        return None
    return f"{'wss' if secure else 'ws'}://{host_header}{request.path}"


def _closed_detail(exc: Exception) -> str:
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is not None:
        return f"close code {rcvd.code}{': ' + rcvd.reason if rcvd.reason else ''}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _field(obj: Any, name: str) -> Any:
    """Read ``name`` from a ``pb`` message or a mapping (in-process tasks are mappings)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def serve_openpi(client: Any, job_id: str, policy: OpenPIPolicy, *, max_policy_faults: int = 100,
                 on_event: Any = None, reconnect_s: float = 0.0, slot: str = "") -> Any:
    """Serve ``policy`` for the job to its end, attaching again after each episode the server failed.

    ``EvaluationClient.serve_policy`` reports a policy's exception to the station (that episode ends with the
    error named) and then ends its session; the server may be back for the next episode, so this attaches
    again (the next ``reset`` reconnects to the server) until the job ends or ``max_policy_faults`` episodes
    failed. Returns the final ``pb.JobStatus``.

    :param client: an :class:`~strands_robots.client.EvaluationClient`.
    :param job_id: the job whose policy this serves.
    :param policy: the :class:`OpenPIPolicy` bridging the team's openpi server.
    :param max_policy_faults: episodes the server may fail before this gives up (raising ``PolicyFailed``).
    :param on_event: called with every request the station sends.
    :param reconnect_s: when the relay becomes unreachable, keep attaching for up to this many seconds.
    :param slot: the comparison job's slot this server serves ("" for a job of one policy).
    """
    from strands_robots.client.served_policy import serve_to_the_end

    return serve_to_the_end(client, job_id, policy, max_policy_faults=max_policy_faults, on_event=on_event,
                            reconnect_s=reconnect_s, slot=slot)
