"""What the ROS tools share (the CLI's ROS commands, the monitoring tools): the environment check and the events."""

from __future__ import annotations


def ros_env_check(command: str) -> None:
    """Exit with one line saying what to do when rclpy or the messages are not importable."""
    try:
        import rclpy  # noqa: F401
        import strands_robots_msgs.msg  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"strands-robots {command}: ROS 2 is not importable ({exc}); "
                         "run `source scripts/env.sh` first")


def events_topic(namespace: str) -> str:
    ns = namespace.strip("/")
    return f"/{ns}/observer_events" if ns else "/observer_events"


def subscribe_events(node, namespace: str, on_event):
    """Subscribe ``node`` to the observer stream of ``namespace``; ``on_event`` gets core event dataclasses."""
    from strands_robots_msgs.msg import ObserverEvent

    from strands_robots.conversions.events import msg_to_event
    from strands_robots.ros.qos import EVENT_QOS

    return node.create_subscription(ObserverEvent, events_topic(namespace),
                                    lambda msg: on_event(msg_to_event(msg)), EVENT_QOS)
