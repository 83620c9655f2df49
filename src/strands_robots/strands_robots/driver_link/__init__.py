"""The arm driver's client: how the rollout node and the station reach a driver process over ROS.

:class:`~strands_robots.driver_link.client.RosDriverBackend` is the rollout's robot backend (observations, the
command stream and its window, leases, start pose, safety reset) and the station's handle on its arms; its
parts are the per-arm service and action calls (``arms.py``), the rollout's end of the command stream
(``command_stream.py``) and the control loop's window onto it (``stream_window.py``). Not a process of its own:
the rollout and the station processes both use it, so it sits beside :mod:`strands_robots.nodes`, not in it.
"""
