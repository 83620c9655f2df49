"""Bring up the simulated arm driver: a lifecycle node, configured and then activated by this file, once.

    ros2 launch strands_robots arm_driver.launch.py
    ros2 launch strands_robots arm_driver.launch.py namespace:=lab control_frequency:=100.0
    ros2 launch strands_robots arm_driver.launch.py hardware:=ros2_control controller_manager:=/robot1
    ros2 lifecycle set /strands/arm_driver deactivate    # holds the arms; stays inactive until activated again

The activation happens once, after the first configure: an operator's ``deactivate`` (or ``cleanup`` and a new
``configure``) is not undone by this file. When the driver exits on its own the launch ends, and a non-zero exit
code (a driver that died) makes the launch exit non-zero, and so does a parameters file that does not read as
one (checked before the driver starts, the file and the reason in one line). Colour codes only reach a
terminal.
station.launch.py and rollout_only.launch.py include this file (rollout.launch.py through station.launch.py).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.substitutions import FindPackageShare
from lifecycle_msgs.msg import Transition

from strands_robots.arm.ros2_control import CONTROLLER_MANAGER_ENV
from strands_robots.launch_support import check_parameters_file, end_launch_with, output_options


def _with_env(options: dict, env: dict) -> dict:
    """Return the node options with ``env`` added to their ``additional_env``."""
    return dict(options, additional_env={**options.get("additional_env", {}), **env})


def generate_launch_description() -> LaunchDescription:
    config_file = LaunchConfiguration("config_file")
    namespace = LaunchConfiguration("namespace")
    control_frequency = LaunchConfiguration("control_frequency")

    args = [
        DeclareLaunchArgument(
            "config_file",
            default_value=PathJoinSubstitution([FindPackageShare("strands_robots"), "config", "rollout.yaml"]),
            description="ROS parameters file (the arm_driver section is used)",
        ),
        DeclareLaunchArgument("namespace", default_value="strands", description="namespace of the driver"),
        DeclareLaunchArgument("control_frequency", default_value="50.0", description="joint_states rate in Hz"),
        DeclareLaunchArgument("hardware", default_value="mujoco",
                              description="the driver's hardware: mujoco (simulated) or ros2_control"),
        DeclareLaunchArgument("arms_config", default_value="",
                              description="the driver's arms.yaml (empty: the package's for the hardware)"),
        DeclareLaunchArgument("controller_manager", default_value="",
                              description="hardware ros2_control: the controller_manager's namespace or node name "
                                          "(empty: the arms config's)"),
    ]
    driver = LifecycleNode(
        package="strands_robots",
        executable="arm_driver_node",
        name="arm_driver",
        namespace=namespace,
        parameters=[config_file, {"control_rate_hz": control_frequency, "hardware": LaunchConfiguration("hardware"),
                                  "config_file": LaunchConfiguration("arms_config")}],
        **_with_env(output_options(), {CONTROLLER_MANAGER_ENV: LaunchConfiguration("controller_manager")}),
    )
    configure = EmitEvent(
        event=ChangeState(
            lifecycle_node_matcher=matches_action(driver), transition_id=Transition.TRANSITION_CONFIGURE
        )
    )
    activate_once_configured = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=driver,
            start_state="configuring",
            goal_state="inactive",
            entities=[
                EmitEvent(
                    event=ChangeState(
                        lifecycle_node_matcher=matches_action(driver),
                        transition_id=Transition.TRANSITION_ACTIVATE,
                    )
                )
            ],
            handle_once=True,
        )
    )
    end_with_driver = RegisterEventHandler(
        OnProcessExit(target_action=driver, on_exit=end_launch_with("arm_driver", "the arm driver died"))
    )
    check = OpaqueFunction(function=check_parameters_file, args=[config_file])
    return LaunchDescription(args + [check, driver, activate_once_configured, configure, end_with_driver])
