"""The Evaluation Client: run a policy on a remote station through the relay (no ROS needed).

    from strands_robots.client import EvaluationClient, Policy, EndEpisode, pb

Installs on its own (``pip install clients/python`` from the repository) with grpcio and protobuf only. It
imports nothing from strands_robots outside this package except the generated protobuf modules.
"""

from strands_robots.client import pb
from strands_robots.client.errors import (
    AlreadyExists,
    DeadlineExceeded,
    InvalidTask,
    MessageTooLarge,
    NotFound,
    PolicyFailed,
    RelayError,
    SessionAborted,
    Unauthenticated,
    Unavailable,
)
from strands_robots.client.evaluation_client import EvaluationClient, task_from_dict
from strands_robots.client.policy import EndEpisode, Policy

__all__ = [
    "EvaluationClient",
    "Policy",
    "EndEpisode",
    "pb",
    "task_from_dict",
    "RelayError",
    "Unauthenticated",
    "NotFound",
    "InvalidTask",
    "AlreadyExists",
    "Unavailable",
    "SessionAborted",
    "MessageTooLarge",
    "DeadlineExceeded",
    "PolicyFailed",
]
