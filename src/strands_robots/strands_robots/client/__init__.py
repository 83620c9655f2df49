"""The Evaluation Client: run a policy on a remote station through the relay (no ROS needed).

    from strands_robots.client import EvaluationClient, Policy, EndEpisode, pb

Installs on its own (``pip install clients/python`` from the repository) with grpcio and protobuf only. It
imports nothing from strands_robots outside this package except the generated protobuf modules.

``Policy`` and ``EndEpisode`` are the very classes the rollout uses in process
(:mod:`strands_robots.policies.base` re-exports them). Importing them loads neither grpc nor protobuf: the
client, ``pb`` and ``task_from_dict`` are imported on first use.
"""

from typing import Any

from strands_robots.client.errors import (
    AlreadyExists,
    DeadlineExceeded,
    InvalidTask,
    MessageTooLarge,
    NotAllowed,
    NotFound,
    NotNow,
    PolicyFailed,
    QuotaExceeded,
    RecordingCorrupt,
    RecordingRefused,
    RelayError,
    SessionAborted,
    Unauthenticated,
    Unavailable,
)
from strands_robots.client.policy import EndEpisode, Policy

__all__ = [
    "EvaluationClient",
    "Policy",
    "EndEpisode",
    "pb",
    "task_from_dict",
    "RelayError",
    "Unauthenticated",
    "NotAllowed",
    "NotFound",
    "NotNow",
    "InvalidTask",
    "AlreadyExists",
    "Unavailable",
    "SessionAborted",
    "MessageTooLarge",
    "QuotaExceeded",
    "DeadlineExceeded",
    "PolicyFailed",
    "RecordingCorrupt",
    "RecordingRefused",
]

_LAZY = {"EvaluationClient": "strands_robots.client.evaluation_client",
         "task_from_dict": "strands_robots.client.evaluation_client"}


def __getattr__(name: str) -> Any:
    """Import the grpc and protobuf parts on first use (``pb``, ``EvaluationClient``, ``task_from_dict``)."""
    import importlib

    if name == "pb":
        return importlib.import_module("strands_robots.client.pb")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
