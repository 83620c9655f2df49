"""The DDS settings every strands_robots process runs with (:mod:`.fastdds_profile`). No ROS import."""
