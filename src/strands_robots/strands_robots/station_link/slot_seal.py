"""A comparison episode's slot, sealed for the rollout node: the goal names no policy the operator could read.

The station sends each episode's rollout a ``run_episode`` goal, and anyone on the ROS domain (the operator's own
tools among them) can read a goal. A comparison's slot names the policy (``vision``, ``blind``), and the operator
must not learn which policy runs until the job ends; yet the rollout node must open the session of that slot at
the relay. So the goal carries the slot sealed with a key both processes derive from the station's relay token
(their start-time credentials, read from a private file, never on a topic), beside the blind label the operator
sees anyway.

The seal is a one-time pad from HMAC-SHA256 (a pseudorandom function) keyed by that key, over the job and episode
ids (an episode id is never reused within a job, so no two slots share a pad), with the name padded to 64 bytes
(every slot seals to the same length) and a 128-bit HMAC tag over the sealed bytes: a goal made without the key,
or altered, is refused by name. Standard library only (``hmac``, ``hashlib``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["SlotSealError", "seal_key", "seal_slot", "unseal_slot", "SEALED_LENGTH"]

_NAME_BYTES = 64  # a slot name's most bytes (compare.SLOT_PATTERN): every sealed slot is this long
_TAG_BYTES = 16
#: The length of a sealed slot's text (url-safe base64, no padding).
SEALED_LENGTH = len(base64.urlsafe_b64encode(b"\0" * (_NAME_BYTES + _TAG_BYTES)).rstrip(b"="))


class SlotSealError(ValueError):
    """A sealed slot that this key did not seal (another station's token, altered, or not a sealed slot)."""


def seal_key(token: str) -> bytes:
    """Return the sealing key of a station's relay token (the token itself never leaves its process)."""
    if not token:
        raise SlotSealError("no station token to derive the slot seal's key from")
    return hmac.new(token.encode("utf-8"), b"strands_robots comparison slot seal v1", hashlib.sha256).digest()


def _pad(key: bytes, job_id: str, episode_id: str) -> bytes:
    context = f"{job_id}\0{episode_id}".encode("utf-8")
    blocks = (hmac.new(key, b"pad" + bytes([i]) + context, hashlib.sha256).digest()
              for i in range(-(-_NAME_BYTES // 32)))
    return b"".join(blocks)[:_NAME_BYTES]


def _tag(key: bytes, job_id: str, episode_id: str, sealed: bytes) -> bytes:
    context = f"{job_id}\0{episode_id}\0".encode("utf-8")
    return hmac.new(key, b"tag" + context + sealed, hashlib.sha256).digest()[:_TAG_BYTES]


def seal_slot(key: bytes, job_id: str, episode_id: str, slot: str) -> str:
    """Return ``slot`` sealed for the episode ``episode_id`` of ``job_id`` (text of :data:`SEALED_LENGTH`)."""
    name = slot.encode("utf-8")
    if not 0 < len(name) <= _NAME_BYTES or b"\0" in name:
        raise SlotSealError(f"a slot name is 1-{_NAME_BYTES} bytes without NUL, got {len(name)} bytes")
    sealed = bytes(a ^ b for a, b in zip(name.ljust(_NAME_BYTES, b"\0"), _pad(key, job_id, episode_id)))
    raw = sealed + _tag(key, job_id, episode_id, sealed)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unseal_slot(key: bytes, job_id: str, episode_id: str, text: str) -> str:
    """Return the slot :func:`seal_slot` sealed for this episode.

    :raises SlotSealError: ``text`` is not a slot this key sealed for this job and episode.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)) if len(text) == SEALED_LENGTH else b""
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != _NAME_BYTES + _TAG_BYTES:
        raise SlotSealError(f"sealed_slot is not a sealed slot ({SEALED_LENGTH} url-safe base64 characters)")
    sealed, tag = raw[:_NAME_BYTES], raw[_NAME_BYTES:]
    if not hmac.compare_digest(tag, _tag(key, job_id, episode_id, sealed)):
        raise SlotSealError(f"sealed_slot of episode {episode_id!r} was not sealed by this station's token for "
                            f"this job and episode")
    name = bytes(a ^ b for a, b in zip(sealed, _pad(key, job_id, episode_id))).rstrip(b"\0")
    return name.decode("utf-8")
