"""strands_robots: robot-policy rollouts on arms, reported step by step.

The packages under this one split into a ROS-free core (simulation, rollout, policies, arm, station, relay,
client), the conversions to ROS messages (conversions, which import generated messages only on first use) and thin
rclpy shells (nodes).
"""

import os as _os

__version__ = "0.1.0"

# gRPC's fork support runs its own handlers in every child forked while a channel is busy; from grpcio 1.81 such
# a child can die before it execs ("epoll_wait error: Bad file descriptor", grpc/grpc#43055), so a process the
# supervisor (re)starts beside a relay connection may never run. Nothing here uses gRPC across a fork (every child
# execs at once), so it is off unless the environment says otherwise. gRPC reads it when it is first imported:
# this package's own modules import grpc only after this line.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
