"""The camera process: its node (``node.py``, run as ``camera_node``), publishing a camera adapter's frames.

The adapters and the rules of frames live in :mod:`strands_robots.cameras` (no rclpy); the frames' messages are
:mod:`strands_robots.conversions.camera`.
"""
