"""The stamp of a frame that mirrors the arms: the time of the joint state it shows, never the time it was drawn.

A simulated camera draws the arms from the driver's last ``joint_states``. The frame shows the arms as they were
when that state was measured, so that is its stamp (REP 103/``std_msgs/Header``: the time of the data). Stamped
at its drawing instead, a driver that froze (its joint stream stopped, its last state however old) would yield
fresh-stamped pictures of arms that may have moved since, and the consumer's stale rule (``now - stamp >
max_age_s``, :mod:`strands_robots.cameras.frames`) could not see it. The rules, in order (pure, ns on the
camera node's clock, the clock the driver stamps with):

1. the joint state's time is its header stamp; a driver that leaves it zero gets the time the camera node
   received it (what it knows of the state's age);
2. a frame is stamped with its joint state's time, but never later than now (a driver clock ahead of this one
   does not make frames from the future);
3. no frame is drawn from a joint state older than the camera's ``max_age_s``: every consumer would refuse it as
   stale, so the camera publishes nothing until the joint stream resumes (subscribers see its frames age);
4. a camera draws its next frame only from a joint state newer than its last frame's: the same arms at the same
   time would be the same picture under the same stamp (each frame has a time of its own).

A frame that shows no arms (a real camera, the test pattern) is stamped when it is taken. No rclpy here.
"""

from __future__ import annotations

__all__ = ["joint_state_ns", "frame_stamp_ns"]

_NS = 1_000_000_000


def joint_state_ns(header_stamp_ns: int, received_ns: int) -> int:
    """Rule 1: the time of a joint state (its header stamp; its receipt when the stamp is zero)."""
    return int(header_stamp_ns) if int(header_stamp_ns) > 0 else int(received_ns)


def frame_stamp_ns(joint_ns: int, now_ns: int, max_age_s: float) -> "int | None":
    """Rules 2 and 3: the stamp of a frame drawn now from the joint state of time ``joint_ns``.

    :returns: the stamp, or None when the joint state is older than ``max_age_s`` (draw nothing).
    """
    joint_ns, now_ns = int(joint_ns), int(now_ns)
    if now_ns - joint_ns > max_age_s * _NS:
        return None
    return min(joint_ns, now_ns)
