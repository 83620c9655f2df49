"""Bring up the simulated arm driver and the rollout node, and run one episode end to end.

    ros2 launch strands_robots rollout.launch.py
    ros2 launch strands_robots rollout.launch.py policy_provider:=scripted control_frequency:=200.0
    ros2 topic echo /strands/observer_events      # in another shell

The arm driver is a lifecycle node: this file configures it once the process is up and activates it once it is
configured. The rollout node waits for the driver, runs ``episodes`` episodes, and exits; its exit ends the
launch, so the launch's exit code is the episodes' (0 when every episode's outcome was ok; 1 after an error
or a safety stop).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessExit
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.substitutions import FindPackageShare
from lifecycle_msgs.msg import Transition


def generate_launch_description() -> LaunchDescription:
    config_file = LaunchConfiguration("config_file")
    namespace = LaunchConfiguration("namespace")
    control_frequency = LaunchConfiguration("control_frequency")
    policy_provider = LaunchConfiguration("policy_provider")
    episode_duration = LaunchConfiguration("episode_duration")
    episodes = LaunchConfiguration("episodes")

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
    ]

    driver = LifecycleNode(
        package="strands_robots",
        executable="arm_driver_node",
        name="arm_driver",
        namespace=namespace,
        parameters=[config_file, {"control_rate_hz": control_frequency}],
        output="screen",
        emulate_tty=True,
        additional_env={"PYTHONUNBUFFERED": "1"},
    )
    rollout = Node(
        package="strands_robots",
        executable="rollout_node",
        name="rollout",
        namespace=namespace,
        parameters=[
            config_file,
            {
                "control_frequency": control_frequency,
                "policy_provider": policy_provider,
                "duration_s": episode_duration,
                "autorun_episodes": episodes,
                "exit_after_autorun": True,
            },
        ],
        output="screen",
        emulate_tty=True,
        additional_env={"PYTHONUNBUFFERED": "1"},
    )

    configure = EmitEvent(
        event=ChangeState(
            lifecycle_node_matcher=matches_action(driver), transition_id=Transition.TRANSITION_CONFIGURE
        )
    )
    activate_when_configured = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=driver,
            goal_state="inactive",
            entities=[
                EmitEvent(
                    event=ChangeState(
                        lifecycle_node_matcher=matches_action(driver),
                        transition_id=Transition.TRANSITION_ACTIVATE,
                    )
                )
            ],
        )
    )
    end_with_rollout = RegisterEventHandler(
        OnProcessExit(target_action=rollout, on_exit=[Shutdown(reason="rollout finished")])
    )
    return LaunchDescription(args + [driver, activate_when_configured, configure, rollout, end_with_rollout])
