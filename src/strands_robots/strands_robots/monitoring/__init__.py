"""Monitoring: record the strands topics and cameras to MCAP, serve them to Foxglove, plot recordings, the monitor.

- :mod:`~strands_robots.monitoring.topics` — the topics a station publishes (names, types, QoS kinds); no rclpy.
- :mod:`~strands_robots.monitoring.live` — raw subscriptions (CDR bytes as published); rclpy shell.
- :mod:`~strands_robots.monitoring.topic_recorder` — raw messages into one MCAP file with the rosbag2 conventions
  (latched state first); no rclpy.
- :mod:`~strands_robots.monitoring.serve` — one node's raw subscriptions fanned out to a recorder and/or Foxglove,
  and the topic options of both commands.
- :mod:`~strands_robots.monitoring.record` — ``strands-robots record`` (the command).
- :mod:`~strands_robots.monitoring.foxglove_live` — ``strands-robots foxglove`` / ``record --foxglove``: the live
  topics over the Foxglove WebSocket protocol (foxglove-sdk), loopback by default.
- :mod:`~strands_robots.monitoring.recorded_frames` — camera frames (CompressedImage, CameraInfo) read back.

Imports run one way: record -> serve -> topic_recorder / live -> topics; foxglove_live -> serve; record imports
foxglove_live for ``--foxglove``, never the reverse.
- :mod:`~strands_robots.monitoring.report` — ``strands-robots report RECORDING.mcap``: PNGs per episode and for
  the job (matplotlib).
- :mod:`~strands_robots.monitoring.monitor_app` — ``strands-robots monitor``: the rqt_strands_robots widget in a
  window of its own (PyQt5 where rqt is absent).
"""
