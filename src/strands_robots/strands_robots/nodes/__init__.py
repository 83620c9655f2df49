"""The node processes, one subpackage per process: ``arm_driver``, ``rollout``, ``station``, ``camera``.

Each holds its node (``node.py``, the process's ``main``), its parameters and its ROS adapters; what the processes
share is in :mod:`strands_robots.ros` (plumbing) and :mod:`strands_robots.driver_link` (the driver's clients).
"""
