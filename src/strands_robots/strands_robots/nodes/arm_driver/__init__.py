"""The arm driver process: its node (``node.py``, run as ``arm_driver_node``), its parameters, and its ROS adapters.

The driver's rules live in :mod:`strands_robots.arm` (no rclpy); the files here put them on ROS: the services
(``commands.py``, ``leases.py``), the published state (``publish.py``), the command stream (``stream.py``), the
start-pose action (``start_pose.py``) and the spin thread the lifecycle drives (``spin.py``).
"""
