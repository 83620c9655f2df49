"""Bring up a simulated station: the arm driver, the camera node, the rollout node and the station node.

    ros2 launch strands_robots station.launch.py                          # jobs from the submit_job service
    ros2 launch strands_robots station.launch.py relay_credentials_file:=/path/relay_credentials.yaml
    ros2 service call /strands/submit_job strands_robots_msgs/srv/SubmitJob "{...}"   # without a relay
    demo_job --ros --namespace strands                                    # the demo job, through submit_job

The camera node (``camera_node``, name ``camera``) renders the ``cameras`` of ``cameras_file`` (default
``scene,wrist`` of the package's ``config/cameras.yaml``) from the driver's joint states and publishes
``<camera>/image_raw`` (+ ``/compressed``, ``camera_info``); the rollout node puts each frame in every
observation as ``<camera>.image`` and lays out each episode's scene through it (``camera_scene_node``).
``cameras:=''`` runs no camera node and no camera in the observations.
The driver comes from arm_driver.launch.py (configured, then activated once). The rollout node takes its
episodes from the station (no autorun; the station moves the arms to the start pose and holds the lease). The
station takes jobs from the relay its ``relay_credentials_file`` names (a 0600 file: the relay, the station's
id and token; ``wire/credentials.py``; the rollout node gets the same file for its ``relay`` policy provider), or
from its ``submit_job`` service when that is empty, and runs until Ctrl-C; when a node dies the launch ends
non-zero and names it. The station keeps its jobs in ``state_dir``, by default one directory per station and per
relay, ``$XDG_STATE_HOME/strands_robots/<station_id>/relay-<relay address>-<hash>`` (``.../submit_job`` without a
relay; ``station/state_dir.py``): a station restarted against the same relay resumes its unfinished jobs, and
never resumes a job against a relay that does not know it. Every parameter not given here
comes from ``config_file`` (the driver's and the rollout's) and ``station_config_file`` (the station's); both
are checked before any node starts (the file, the key and the reason in one line).

rollout.launch.py includes this file (and adds the relay and the job): every argument can be given by an
including file, and an empty one leaves the config file's value in force. Ctrl-C ends every node on its own
within the launch's 5 s SIGINT grace (a stopping station waits at most a second for the rollout node and driver).
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from strands_robots.launch_support import check_cameras, check_parameters_file, end_launch_with, output_options

# The included file sits beside this one, installed and in the source tree alike.
_HERE = os.path.dirname(os.path.realpath(__file__))

# Launch argument -> station node parameter, given to the node only when not empty.
STATION_ARGUMENTS = ("station_id", "relay_credentials_file", "state_dir", "robot_name", "record", "team_recordings",
                     "suites_dir")
# Launch argument -> rollout node parameter, given only when not empty.
ROLLOUT_ARGUMENTS = ("robot_name", "recording_dir", "relay_credentials_file")


def _given(context, names) -> dict:
    values = {}
    for name in names:
        value = LaunchConfiguration(name).perform(context)
        if value:
            values[name] = value
    return values


def _nodes(context, config_file, station_config_file, namespace, control_frequency):
    """Return the rollout and station nodes and the handlers that end the launch when one of them stops.

    Built when the launch arguments are known, so an empty argument leaves the config file's value in force.
    """
    cameras = LaunchConfiguration("cameras").perform(context).strip()
    camera_params = {"cameras": cameras, "cameras_file": LaunchConfiguration("cameras_file").perform(context)}
    camera_nodes = []
    if cameras:
        camera = Node(package="strands_robots", executable="camera_node", name="camera", namespace=namespace,
                      parameters=[camera_params], **output_options())
        camera_nodes = [camera, RegisterEventHandler(OnProcessExit(
            target_action=camera, on_exit=end_launch_with("camera", "the camera node stopped")))]
    rollout = Node(
        package="strands_robots",
        executable="rollout_node",
        name="rollout",
        namespace=namespace,
        parameters=[
            config_file,
            {
                "control_frequency": control_frequency,
                "start_pose_before_episode": False,  # the station moves the arms to the start pose
                "autorun_episodes": 0,
                "exit_after_autorun": False,
                **_given(context, ROLLOUT_ARGUMENTS),
                **(dict(camera_params, camera_scene_node="camera") if cameras else {}),
            },
        ],
        **output_options(),
    )
    station_params = _given(context, STATION_ARGUMENTS)
    for flag in ("record", "team_recordings"):  # a plain string would reach the node as a string, not a bool
        if flag in station_params:
            station_params[flag] = station_params[flag].strip().lower() in ("true", "1", "yes")
    station = Node(
        package="strands_robots",
        executable="station_node",
        name="station",
        namespace=namespace,
        parameters=[station_config_file, station_params],
        **output_options(),
    )
    return camera_nodes + [
        rollout,
        RegisterEventHandler(OnProcessExit(target_action=rollout,
                                           on_exit=end_launch_with("rollout", "the rollout stopped"))),
        station,
        RegisterEventHandler(OnProcessExit(target_action=station,
                                           on_exit=end_launch_with("station", "the station stopped"))),
    ]


def generate_launch_description() -> LaunchDescription:
    config_file = LaunchConfiguration("config_file")
    station_config_file = LaunchConfiguration("station_config_file")
    namespace = LaunchConfiguration("namespace")
    control_frequency = LaunchConfiguration("control_frequency")
    share = FindPackageShare("strands_robots")

    args = [
        DeclareLaunchArgument(
            "config_file", default_value=PathJoinSubstitution([share, "config", "rollout.yaml"]),
            description="ROS parameters file for the arm driver and rollout nodes",
        ),
        DeclareLaunchArgument(
            "station_config_file", default_value=PathJoinSubstitution([share, "config", "station.yaml"]),
            description="ROS parameters file for the station node",
        ),
        DeclareLaunchArgument("namespace", default_value="strands", description="namespace of the station's nodes"),
        DeclareLaunchArgument("control_frequency", default_value="50.0", description="control rate in Hz"),
        DeclareLaunchArgument("station_id", default_value="", description="station id (empty: the config file's)"),
        DeclareLaunchArgument(
            "relay_credentials_file", default_value="",
            description="the station's 0600 relay credentials file, for the station and rollout nodes (empty: no "
                        "relay, jobs from submit_job)",
        ),
        DeclareLaunchArgument("state_dir", default_value="",
                              description="persisted job state (empty: the config file's; its default is one "
                                          "directory per station and relay)"),
        DeclareLaunchArgument("robot_name", default_value="", description="robot name (empty: the config files')"),
        DeclareLaunchArgument("suites_dir", default_value="",
                              description="the station's suites, one YAML each (empty: the config file's; its "
                                          "default is the package's config/suites)"),
        DeclareLaunchArgument(
            "recording_dir", default_value="", description="where recordings go (empty: the config file's)"
        ),
        DeclareLaunchArgument("cameras", default_value="scene,wrist",
                              description="comma-separated cameras of cameras_file the camera node renders and every "
                                          "observation holds (empty: no camera node)"),
        DeclareLaunchArgument("cameras_file", default_value="",
                              description="camera file (empty: the package's config/cameras.yaml)"),
        DeclareLaunchArgument("record", default_value="",
                              description="true: every rollout recorded to MCAP (empty: the config file's)"),
        DeclareLaunchArgument("team_recordings", default_value="",
                              description="false: a job asking for its recordings (record: true) is refused and no "
                                          "recording is sent to a team (empty: the config file's; its default true)"),
        DeclareLaunchArgument("hardware", default_value="mujoco",
                              description="the arm driver's hardware: mujoco (simulated) or ros2_control"),
        DeclareLaunchArgument("arms_config", default_value="",
                              description="the driver's arms.yaml (empty: the package's for the hardware)"),
        DeclareLaunchArgument("controller_manager", default_value="",
                              description="hardware ros2_control: the controller_manager's namespace or node name"),
    ]
    driver = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(_HERE, "arm_driver.launch.py")),
        launch_arguments={
            "config_file": config_file,
            "namespace": namespace,
            "control_frequency": control_frequency,
            "hardware": LaunchConfiguration("hardware"),
            "arms_config": LaunchConfiguration("arms_config"),
            "controller_manager": LaunchConfiguration("controller_manager"),
        }.items(),
    )
    checks = [
        OpaqueFunction(function=check_parameters_file, args=[config_file]),
        OpaqueFunction(function=check_parameters_file, args=[station_config_file]),
        OpaqueFunction(function=check_cameras,
                       args=[LaunchConfiguration("cameras"), LaunchConfiguration("cameras_file")]),
    ]
    nodes = OpaqueFunction(function=_nodes, args=[config_file, station_config_file, namespace,
                                                   control_frequency])
    return LaunchDescription(args + checks + [driver, nodes])
