"""The rollout process: its node (``node.py``, run as ``rollout_node``), its parameters and its ROS adapters.

The episode itself is :mod:`strands_robots.rollout` (no rclpy); the files here serve it on ROS: the goal read
with the parameters (``goal.py``, ``params.py``), the feedback (``observers.py``), the observer events
(``event_publisher.py``), the operator's takeover services (``takeover.py``) and the camera frames the policy
sees and the recording keeps (``camera_frames.py``, ``camera_recording.py``). The driver is reached through
:mod:`strands_robots.driver_link`.
"""
