"""The lease proof of a streamed command: an HMAC of the command keyed by the lease token.

The control lease's token is a secret: it renews, releases and resets the safety envelope, so it is never
published. A service request (``SendAction``) carries it point to point, but a topic is read by anyone on the
domain (``ros2 topic echo``, ``strands-robots record``). So an ``ActionCommand`` on the command stream does not
carry the token: it carries ``lease_proof``, HMAC-SHA256 of the command's own fields keyed by the token. The
driver, which holds the current token, recomputes it (:meth:`strands_robots.arm.lease.LeaseManager.verify`):

- a reader of the stream learns nothing that renews, releases or resets anything;
- a command whose keys, values, run id, step index, deadline or lookahead (the chunk's next steps, which
  hardware that takes trajectories sends on to its controller) were changed in transit, or that was signed
  with another token, applies nothing (``not_lease_holder``, as a foreign token on the service path);
- replaying a copied command is what the stream's own rules refuse: after its ``apply_by`` it is ``stale``,
  before it its step is ``out_of_order`` once applied.

What this does not do: encrypt the stream or authenticate DDS participants (that is SROS2's job on a real
station); an unauthenticated reader still sees the commanded values.

Pure, no rclpy: the rollout signs in :func:`strands_robots.conversions.actions.stream_command_msg`, the driver verifies.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from typing import Sequence

# Bumped if the signed encoding changes: a driver never verifies a proof made for another encoding.
_DOMAIN = b"strands_robots/action_command/v2\x00"
_U32 = struct.Struct(">I")
_HEAD = struct.Struct(">QQ")  # step_index, apply_by_ns
_LOOKAHEAD_HEAD = struct.Struct(">IQ")  # lookahead value count, lookahead_period_ns


def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _U32.pack(len(raw)) + raw


@functools.lru_cache(maxsize=64)
def _keys_block(keys: "tuple[str, ...]") -> bytes:
    # An episode sends the same keys every step: their encoding is made once.
    return _U32.pack(len(keys)) + b"".join(_text(k) for k in keys)


def command_message(run_id: str, step_index: int, apply_by_ns: int, keys: Sequence[str],
                    values: Sequence[float], lookahead: Sequence[float] = (), lookahead_period_ns: int = 0) -> bytes:
    """Return the bytes a lease proof signs: every field of the command that decides what moves, unambiguously.

    The lookahead (the chunk's next steps, flattened) and its period are signed too: on hardware that takes
    trajectories they reach the controller, so they move the arm as much as ``values`` do.

    Each text is length-prefixed and each value packed as an IEEE-754 double (the ``float64`` the message
    carries), so no two different commands share an encoding. NaN is encoded like any double: it is signed,
    then refused by the per-key rules (``non_finite``), never silently changed.

    :raises ValueError: ``keys`` and ``values`` differ in length, or a step index / deadline is negative.
    """
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    if step_index < 0 or apply_by_ns < 0 or lookahead_period_ns < 0:
        raise ValueError(f"step_index, apply_by_ns and lookahead_period_ns must be >= 0, got {step_index}, "
                         f"{apply_by_ns} and {lookahead_period_ns}")
    return b"".join((_DOMAIN, _text(run_id), _HEAD.pack(int(step_index), int(apply_by_ns)),
                     _keys_block(tuple(keys)), struct.pack(f">{len(values)}d", *values),
                     _LOOKAHEAD_HEAD.pack(len(lookahead), int(lookahead_period_ns)),
                     struct.pack(f">{len(lookahead)}d", *lookahead)))


def sign(lease_token: str, message: bytes) -> str:
    """Return the lease proof of ``message`` (hex HMAC-SHA256 keyed by the token; empty for no token)."""
    if not lease_token:
        return ""
    # hmac.new, not hmac.digest: the one-shot hmac.digest releases the GIL around OpenSSL's HMAC whatever the
    # size, and taking it back waits for any other thread of the node that took it meanwhile, up to the switch
    # interval (0.5 ms in the node processes) and more on a loaded machine: with one busy thread beside it,
    # 2-17 % of hmac.digest calls took 0.6-0.9 ms against 1.5 us (hmac.new keeps the GIL for messages under
    # hashlib's 2 KiB threshold; a command is a few hundred bytes). Same bytes out.
    return hmac.new(lease_token.encode("utf-8"), message, hashlib.sha256).hexdigest()


def proves(lease_token: str, message: bytes, proof: str) -> bool:
    """Whether ``proof`` was made for ``message`` with ``lease_token`` (constant-time compare)."""
    if not lease_token or not isinstance(proof, str) or not proof:
        return False
    return hmac.compare_digest(sign(lease_token, message), proof)

