"""QoS profiles shared by every node and client, so publishers and subscribers always match.

- ``EVENT_QOS``: streams where every message counts (observer events): reliable, volatile, a deep queue so a
  slow subscriber does not lose events during a burst.
- ``LATCHED_QOS``: latest-state topics (``SafetyStop``, ``DriverStatus``, ``LeaseState``, ``JobStatus``):
  reliable + transient_local depth 1, so a late subscriber (``ros2 topic echo`` started later) gets the
  current state at once. Subscribers must use it too: a volatile subscriber never receives the latched
  sample.
- ``STATE_QOS``: periodic robot state (``joint_states``): reliable, volatile, keep_last 10. Reliable, so
  ``ros2 topic echo`` and rosbag (reliable by default) match; a short queue, because only the latest
  reading matters to the control loop.
- ``COMMAND_QOS`` / ``VERDICT_QOS``: the command stream (``action_commands``, rollout -> driver) and the verdict
  stream (``action_verdicts``, driver -> rollout): reliable, volatile, keep_last 2000 on both sides. Every
  command must get its verdict, so the history is deep enough to hold several seconds at 1 kHz, while the
  rollout never has more than its command window (50 ms: at most 50 commands at 1 kHz) in flight, so no reader
  falls that far behind; one that did would lose the oldest (the rollout counts those steps as unknown after
  its verdict bound), and it never blocks the writer.
- ``IMAGE_QOS``: camera images and camera infos: sensor-data QoS (best effort, keep_last 5), as camera drivers
  publish them (``conversions/camera.py`` has the topics and the messages).
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

EVENT_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1000,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

STATE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

COMMAND_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=2000,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

VERDICT_QOS = COMMAND_QOS

SENSOR_QOS = STATE_QOS
"""Alias: joint readings are the sensor stream of the arms."""

DIAGNOSTICS_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""``/diagnostics`` as diagnostic_aggregator and rqt_runtime_monitor subscribe to it (default QoS, depth 10)."""

IMAGE_QOS = qos_profile_sensor_data

__all__ = ["COMMAND_QOS", "DIAGNOSTICS_QOS", "EVENT_QOS", "IMAGE_QOS", "LATCHED_QOS", "SENSOR_QOS", "STATE_QOS",
           "VERDICT_QOS"]
