"""Bring up the simulated arm driver: a lifecycle node, configured and then activated by this file, once.

    ros2 launch strands_robots arm_driver.launch.py
    ros2 launch strands_robots arm_driver.launch.py namespace:=lab control_frequency:=100.0
    ros2 lifecycle set /strands/arm_driver deactivate    # holds the arms; stays inactive until activated again

The activation happens once, after the first configure: an operator's ``deactivate`` (or ``cleanup`` and a new
``configure``) is not undone by this file. When the driver exits on its own the launch ends, and a non-zero exit
code (a driver that died) makes the launch exit non-zero, and so does a parameters file that does not read as
one (checked before the driver starts, the file and the reason in one line). Colour codes only reach a
terminal.
station.launch.py and rollout_only.launch.py include this file (rollout.launch.py through station.launch.py).
"""

import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessExit
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.substitutions import FindPackageShare
from lifecycle_msgs.msg import Transition


class ProcessFailed(RuntimeError):
    """A launched process exited non-zero while the launch was not shutting down."""


def end_launch_with(name: str, meaning: str):
    """Return an OnProcessExit callback: a clean exit ends the launch, a failed one makes it exit non-zero.

    ros2 launch exits non-zero only when an exception is raised inside it, so a failed exit raises. Nothing
    happens while the launch is already shutting down (Ctrl-C): a second Shutdown then is what made every
    Ctrl-C end in "Cannot shutdown a ROS adapter that is not running".
    """

    def on_exit(event, context):
        if context.is_shutdown:
            return None
        if event.returncode != 0:
            raise ProcessFailed(f"{name} exited with code {event.returncode} ({meaning})")
        return [Shutdown(reason=f"{name} finished")]

    return on_exit


class BadParametersFile(ValueError):
    """The parameters file given to the launch does not read as one (missing, not YAML, not node sections)."""


def check_parameters_file(context, config_file):
    """Refuse a bad parameters file before any node starts: one error line naming the file, key and reason.

    Bad: missing, not YAML, not node sections, a parameter none of our nodes declares (a typo ROS ignores), or
    a value of the wrong type or out of range for the node that declares it.
    """
    from strands_robots.cli.bringup import parameters_file_refusal

    path = config_file.perform(context) if hasattr(config_file, "perform") else str(config_file)
    reason = parameters_file_refusal(path)
    if reason:
        raise BadParametersFile(reason)
    return []


def output_options() -> dict:
    """Return the launch options for a node's output: unbuffered, with colour only on a terminal."""
    return {"output": "screen", "emulate_tty": sys.stdout.isatty(), "additional_env": {"PYTHONUNBUFFERED": "1"}}


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
    ]
    driver = LifecycleNode(
        package="strands_robots",
        executable="arm_driver_node",
        name="arm_driver",
        namespace=namespace,
        parameters=[config_file, {"control_rate_hz": control_frequency}],
        **output_options(),
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
