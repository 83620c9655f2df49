"""Datasets out of episode recordings (ROS-free): ``strands-robots export lerobot`` (:mod:`.lerobot`)."""
