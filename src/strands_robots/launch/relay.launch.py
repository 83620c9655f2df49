"""Run the relay (gRPC, no ROS) between stations and Evaluation Clients as a launch process.

    ros2 launch strands_robots relay.launch.py tokens:=/path/tokens.yaml               # config/relay.yaml's settings
    ros2 launch strands_robots relay.launch.py tokens:=/path/tokens.yaml listen:=127.0.0.1:50051 store:=sqlite:/tmp/r.db

``relay_config_file`` (default ``config/relay.yaml``) gives the host, port, store and limits (deadlines, per-token
stream and job quotas, keepalive); it is checked
before the relay starts (the key and the reason in one line). ``listen`` and ``store`` override it; a port of 0
(the config's default) is a port free at launch time, and the relay's first line says which (``relay listening
on 127.0.0.1:PORT``). ``tokens`` is the YAML token file (``clients: {name: token}``, ``stations: {id: token}``);
rollout.launch.py includes this file with tokens it makes for the launch in a private directory. ``tls_cert`` and
``tls_key`` (PEM files, both or neither) make the relay serve TLS, as the CLI's ``--tls-cert``/``--tls-key`` do; a
plaintext relay on a non-loopback address says so in a WARNING line at start. When the relay exits on its own the
launch ends, non-zero when it failed. ``web`` (``host:port``, or the config file's ``web``) serves the web status
page beside the relay (teams sign in with their token; see docs/relay.md, "Web status page").

    ros2 launch strands_robots relay.launch.py tokens:=/path/tokens.yaml listen:=0.0.0.0:50051 \
        tls_cert:=/etc/relay/cert.pem tls_key:=/etc/relay/key.pem
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import ExecutableInPackage, FindPackageShare

from strands_robots.launch_support import end_launch_with, output_options


class BadRelayConfig(ValueError):
    """The relay's config file or arguments are refused (the file, the key and the reason)."""


def relay_argv(settings, listen: str, store: str, tokens: str, tls_cert: str = "", tls_key: str = "",
               web: str = "") -> list:
    """Return the relay's command line after the executable (every limit of the config file as a flag).

    :param web: host:port of the web status page; "" takes the config file's ``web`` (empty there too: none).
    """
    from strands_robots.relay.config import limit_argv, settings_refusal

    if bool(tls_cert) != bool(tls_key):
        raise BadRelayConfig("tls_cert and tls_key go together (the relay's PEM certificate chain and its key)")
    tls = ["--tls-cert", tls_cert, "--tls-key", tls_key] if tls_cert else []
    web = web or settings.web
    if web and settings_refusal("web", web):
        raise BadRelayConfig(settings_refusal("web", web))
    page = ["--web", web] if web else []
    return ["--listen", listen, "--store", store, "--tokens", tokens, *tls, *page, *limit_argv(settings)]


def _relay(context):
    from strands_robots.cli.bringup import BadConfigFile, load_relay_config
    from strands_robots.cli.station_demo import free_port

    try:
        settings = load_relay_config(LaunchConfiguration("relay_config_file").perform(context))
    except BadConfigFile as exc:
        raise BadRelayConfig(str(exc)) from None
    tokens = LaunchConfiguration("tokens").perform(context)
    if not tokens:
        raise BadRelayConfig("tokens: give the relay's token file (tokens:=/path/tokens.yaml)")
    listen = LaunchConfiguration("listen").perform(context) or f"{settings.host}:{settings.port or free_port()}"
    store = LaunchConfiguration("store").perform(context) or settings.store
    if not store:
        raise BadRelayConfig("store: the relay config leaves it empty; give store:=sqlite:PATH")
    argv = relay_argv(settings, listen, store, tokens, LaunchConfiguration("tls_cert").perform(context),
                      LaunchConfiguration("tls_key").perform(context), LaunchConfiguration("web").perform(context))
    relay = ExecuteProcess(
        cmd=[ExecutableInPackage("relay", "strands_robots"), *argv],
        name="relay",
        **output_options(),
    )
    return [relay, RegisterEventHandler(OnProcessExit(
        target_action=relay, on_exit=end_launch_with("relay", "the relay stopped")))]


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("strands_robots")
    args = [
        DeclareLaunchArgument("relay_config_file", default_value=PathJoinSubstitution([share, "config", "relay.yaml"]),
                              description="the relay's settings (host, port, store, limits)"),
        DeclareLaunchArgument("tokens", default_value="", description="the relay's token file (YAML)"),
        DeclareLaunchArgument("listen", default_value="", description="host:port (empty: the config file's)"),
        DeclareLaunchArgument("store", default_value="", description="sqlite:PATH or postgresql://... "
                                                                     "(empty: the config file's)"),
        DeclareLaunchArgument("tls_cert", default_value="",
                              description="PEM certificate chain: serve TLS (with tls_key); empty: plaintext"),
        DeclareLaunchArgument("tls_key", default_value="", description="PEM private key of tls_cert"),
        DeclareLaunchArgument("web", default_value="", description="host:port of the web status page "
                                                                   "(empty: the config file's web; none when empty)"),
    ]
    return LaunchDescription(args + [OpaqueFunction(function=_relay, args=[])])
