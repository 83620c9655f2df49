"""Bring up a station whose arms are a ros2_control robot: against a controller_manager that is already running.

    ros2 launch strands_robots ros2_control_station.launch.py                       # /controller_manager
    ros2 launch strands_robots ros2_control_station.launch.py controller_manager:=/robot1 \
        arms_config:=/path/my_arms.yaml relay_credentials_file:=/path/relay_credentials.yaml

It is station.launch.py with the arm driver on ``hardware:=ros2_control``: the driver reads the arms from the
joint_state_broadcaster's ``joint_states`` and commands through the controller ``arms_config`` names (default:
the package's ``config/ros2_control/arms.yaml``, the joints of the demo description
``config/ros2_control/two_arms.urdf``). Start the robot first (its controller_manager, the joint_state_broadcaster
and the command controller, active); docs/hardware.md says how, with the demo description on mock hardware too.
Every other argument is station.launch.py's.
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

# The included file sits beside this one; the command line's other arguments reach it as they are.
_HERE = os.path.dirname(os.path.realpath(__file__))


def generate_launch_description() -> LaunchDescription:
    args = [
        DeclareLaunchArgument("controller_manager", default_value="/controller_manager",
                              description="the controller_manager's namespace or node name"),
        DeclareLaunchArgument("arms_config", default_value="",
                              description="the driver's arms.yaml with its ros2_control section (empty: the package's "
                                          "config/ros2_control/arms.yaml)"),
    ]
    station = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(_HERE, "station.launch.py")),
        launch_arguments={
            "hardware": "ros2_control",
            "controller_manager": LaunchConfiguration("controller_manager"),
            "arms_config": LaunchConfiguration("arms_config"),
        }.items(),
    )
    return LaunchDescription(args + [station])
