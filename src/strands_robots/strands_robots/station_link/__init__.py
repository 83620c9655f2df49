"""The station's side of the relay: its link (reports, jobs), its policy sessions and its recording uploads.

Used by the station process (``nodes/station``) and the rollout's relay policy (``policies/relay.py``); the relay
server (:mod:`strands_robots.relay`) is the other end. Both speak :mod:`strands_robots.wire`. Core: no rclpy.
"""
