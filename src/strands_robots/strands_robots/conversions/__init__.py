"""Core dataclasses <-> ROS messages, one module per domain (the relay's protobuf: ``wire/pb_model.py``).

- :mod:`.messages`: the generated classes, imported on first use, and ``builtin_interfaces/Time`` helpers;
- :mod:`.introspection`: any message <-> nested plain data (the form ``mcap_ros2`` serializes);
- :mod:`.numeric`: the numeric-scalar entries of an observation or action as parallel keys and values;
- :mod:`.events`: observer events <-> ``ObserverEvent`` (and its dict form, with no ROS installed);
- :mod:`.actions`: actions and verdicts (``SendAction``, the ``ActionCommand`` / ``ActionVerdict`` stream);
- :mod:`.joint_state`: observations <-> ``JointState``, the driver's robot time, ``/clock``;
- :mod:`.safety`: safety checks <-> ``SafetyCheck`` / ``SafetyStop``;
- :mod:`.driver`: ``DriverStatus``, ``LeaseState``, diagnostics;
- :mod:`.station`: the station model <-> tasks, episode results, job status, answers;
- :mod:`.camera`: camera frames and intrinsics <-> ``Image`` / ``CompressedImage`` / ``CameraInfo``, their topics.

Every module imports without rclpy or any generated message package; message classes are imported on first use.
Callers import the function from its module (this package re-exports nothing).
"""
