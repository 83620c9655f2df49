"""A comparison episode's slot, sealed for the rollout node: the goal names no policy the operator could read.

The station sends each episode's rollout a ``run_episode`` goal, and anyone on the ROS domain (the operator's own
tools among them) can read a goal. A comparison's slot names the policy (``vision``, ``blind``), and the operator
must not learn which policy runs until the job ends; yet the rollout node must open the session of that slot at
the relay. So the goal carries the slot sealed with a key both processes derive from the station's relay token
(their start-time credentials, read from a private file, never on a topic), beside the blind label the operator
sees anyway.

The seal is AES-256-GCM (``cryptography``'s AEAD) under a key HKDF-derived from the token, with a fresh random
96-bit nonce per seal and the job and episode ids as associated data: the name is padded to 64 bytes (every slot
seals to the same length), and a goal made without the key, altered, or moved to another job or episode fails
authentication and is refused by name.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["SlotSealError", "seal_key", "seal_slot", "unseal_slot", "SEALED_LENGTH"]

_NAME_BYTES = 64  # a slot name's most bytes (compare.SLOT_PATTERN): every sealed slot is this long
_NONCE_BYTES = 12
_TAG_BYTES = 16
#: The length of a sealed slot's text (url-safe base64, no padding).
SEALED_LENGTH = len(base64.urlsafe_b64encode(b"\0" * (_NONCE_BYTES + _NAME_BYTES + _TAG_BYTES)).rstrip(b"="))


class SlotSealError(ValueError):
    """A sealed slot that this key did not seal (another station's token, altered, or not a sealed slot)."""


def seal_key(token: str) -> bytes:
    """Return the sealing key of a station's relay token (the token itself never leaves its process)."""
    if not token:
        raise SlotSealError("no station token to derive the slot seal's key from")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"strands_robots comparison slot seal v2").derive(token.encode("utf-8"))


def _context(job_id: str, episode_id: str) -> bytes:
    return f"{job_id}\0{episode_id}".encode("utf-8")


def seal_slot(key: bytes, job_id: str, episode_id: str, slot: str) -> str:
    """Return ``slot`` sealed for the episode ``episode_id`` of ``job_id`` (text of :data:`SEALED_LENGTH`)."""
    name = slot.encode("utf-8")
    if not 0 < len(name) <= _NAME_BYTES or b"\0" in name:
        raise SlotSealError(f"a slot name is 1-{_NAME_BYTES} bytes without NUL, got {len(name)} bytes")
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, name.ljust(_NAME_BYTES, b"\0"), _context(job_id, episode_id))
    return base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode("ascii")


def unseal_slot(key: bytes, job_id: str, episode_id: str, text: str) -> str:
    """Return the slot :func:`seal_slot` sealed for this episode.

    :raises SlotSealError: ``text`` is not a slot this key sealed for this job and episode.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)) if len(text) == SEALED_LENGTH else b""
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != _NONCE_BYTES + _NAME_BYTES + _TAG_BYTES:
        raise SlotSealError(f"sealed_slot is not a sealed slot ({SEALED_LENGTH} url-safe base64 characters)")
    try:
        name = AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _context(job_id, episode_id))
    except InvalidTag:
        raise SlotSealError(f"sealed_slot of episode {episode_id!r} was not sealed by this station's token for "
                            f"this job and episode") from None
    return name.rstrip(b"\0").decode("utf-8")
