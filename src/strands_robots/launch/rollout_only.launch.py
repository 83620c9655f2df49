"""Bring up the simulated arm driver and the rollout node only (no station, no relay), and run episodes.

    ros2 launch strands_robots rollout_only.launch.py
    ros2 launch strands_robots rollout_only.launch.py policy_provider:=scripted control_frequency:=200.0 episodes:=3
    ros2 topic echo /strands/observer_events      # in another shell

The rollout node's own autorun episodes, without a job (``strands-robots up --rollout`` is the same without
``launch``); rollout.launch.py is the whole station running the demo job. The arm driver comes from
arm_driver.launch.py (included: configured, then activated once). The rollout node waits for the driver, runs
``episodes`` episodes and exits; its exit ends the launch. The launch's exit code says how the episodes went: 0
when every episode's outcome was ok, non-zero (and ``[ERROR] [launch]: ... rollout exited with code 1``) after an
error or a safety stop, when the driver died, or when ``config_file`` is refused (no node is started then).
Ctrl-C stops both nodes and exits cleanly.
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from strands_robots.launch_support import check_parameters_file, end_launch_with, output_options

# The included file sits beside this one, installed and in the source tree alike.
_HERE = os.path.dirname(os.path.realpath(__file__))


def _rollout(context, config_file, namespace):
    """Return the rollout node and the handler that ends the launch with it.

    Built when the launch arguments are known, so an empty ``robot_name`` or ``recording_dir`` leaves the
    config file's value in force instead of overriding it with "".
    """
    overrides = {
        "control_frequency": LaunchConfiguration("control_frequency"),
        "policy_provider": LaunchConfiguration("policy_provider"),
        "duration_s": LaunchConfiguration("episode_duration"),
        "autorun_episodes": LaunchConfiguration("episodes"),
        "exit_after_autorun": True,
    }
    for argument in ("robot_name", "recording_dir"):
        value = LaunchConfiguration(argument).perform(context)
        if value:
            overrides[argument] = value
    rollout = Node(
        package="strands_robots",
        executable="rollout_node",
        name="rollout",
        namespace=namespace,
        parameters=[config_file, overrides],
        **output_options(),
    )
    end_with_rollout = RegisterEventHandler(
        OnProcessExit(
            target_action=rollout,
            on_exit=end_launch_with("rollout", "an episode ended in an error or a safety stop"),
        )
    )
    return [rollout, end_with_rollout]


def generate_launch_description() -> LaunchDescription:
    config_file = LaunchConfiguration("config_file")
    namespace = LaunchConfiguration("namespace")
    control_frequency = LaunchConfiguration("control_frequency")

    args = [
        DeclareLaunchArgument(
            "config_file",
            default_value=PathJoinSubstitution([FindPackageShare("strands_robots"), "config", "rollout.yaml"]),
            description="ROS parameters file for the arm driver and rollout nodes",
        ),
        DeclareLaunchArgument("namespace", default_value="strands", description="namespace of both nodes"),
        DeclareLaunchArgument("control_frequency", default_value="50.0", description="control rate in Hz"),
        DeclareLaunchArgument(
            "policy_provider", default_value="mock", description="policy provider: mock, replay or scripted"
        ),
        DeclareLaunchArgument("episode_duration", default_value="5.0", description="episode budget in seconds"),
        DeclareLaunchArgument("episodes", default_value="1", description="episodes to run before exiting"),
        DeclareLaunchArgument("robot_name", default_value="", description="robot name (empty: the config file's)"),
        DeclareLaunchArgument(
            "recording_dir", default_value="", description="where episodes are recorded (empty: the config file's)"
        ),
    ]
    driver = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(_HERE, "arm_driver.launch.py")),
        launch_arguments={
            "config_file": config_file,
            "namespace": namespace,
            "control_frequency": control_frequency,
        }.items(),
    )
    rollout_and_its_end = OpaqueFunction(function=_rollout, args=[config_file, namespace])
    check = OpaqueFunction(function=check_parameters_file, args=[config_file])
    return LaunchDescription(args + [check, driver, rollout_and_its_end])
