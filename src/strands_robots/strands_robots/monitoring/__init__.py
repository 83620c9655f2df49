"""Monitoring: record every strands topic to MCAP, serve them live to Foxglove, plot recordings, the monitor window.

- :mod:`~strands_robots.monitoring.topics` — the topics a station publishes (names, types, QoS kinds); no rclpy.
- :mod:`~strands_robots.monitoring.record` — ``strands-robots record``: the live topics into one MCAP file with
  the rosbag2 conventions (latched state first).
- :mod:`~strands_robots.monitoring.foxglove_live` — ``--foxglove``: the live topics over the Foxglove WebSocket
  protocol (foxglove-sdk), loopback by default.
- :mod:`~strands_robots.monitoring.report` — ``strands-robots report RECORDING.mcap``: PNGs per episode and for
  the job (matplotlib).
- :mod:`~strands_robots.monitoring.monitor_app` — ``strands-robots monitor``: the rqt_strands_robots widget in a
  window of its own (PyQt5 where rqt is absent).
"""
