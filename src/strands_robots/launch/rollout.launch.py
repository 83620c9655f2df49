"""Bring up a complete simulated station and run the demo job from ``config/`` end to end.

    ros2 launch strands_robots rollout.launch.py                         # relay + station + the demo job
    ros2 launch strands_robots rollout.launch.py use_relay:=false        # the job through submit_job, no relay
    ros2 launch strands_robots rollout.launch.py policy_provider:=mock control_frequency:=100.0 namespace:=lab
    ros2 topic echo /strands/job_status                                  # in another shell: the job's snapshots

What runs, in namespace ``namespace``:

* the arm driver (lifecycle: configured, then activated once, by arm_driver.launch.py), the rollout node and
  the station node, from station.launch.py (included);
* with ``use_relay:=true`` (the default) the relay (relay.launch.py, included), with tokens made for this launch
  in a private run dir (mode 0700, files 0600; removed when the launch ends, however it ends), and
  ``demo_job --relay``: an
  Evaluation Client that submits ``job_file`` as a remote team would, serves its policy through the relay and
  watches the job; with ``use_relay:=false``, ``demo_job --ros``, which submits the job to the station's
  ``submit_job`` service (the station runs the policy) and reads ``job_status``.

``demo_job`` prints a progress line per finished episode, then the summary table; its exit ends the launch.
The launch exits 0 when the job SUCCEEDED, and non-zero otherwise, saying why: ``demo_job exited with code 1
(the job did not succeed)`` after the job's own last line, or the node or relay that died. Every config file
(``config_file``, ``station_config_file``, ``relay_config_file``, ``job_file``) is checked before any process
starts, a refusal being one line with the file, the key and the reason. Ctrl-C stops every process (exit 0;
demo_job's last line says the job was left unfinished; it exits 0 here, ``--stopped-exit-code 0``): each ends on
its own, "process has finished cleanly", well inside the 5 s after which ``launch`` would escalate to SIGTERM
(1.2-2.4 s from the Ctrl-C to the launch's exit, mid-job, on a loaded 2-core machine; docs/ros.md, "Stopping").
``exit_when_done:=false`` keeps the station (and the relay) up after the job until Ctrl-C.

Every run is repeatable: a launch never inherits another launch's jobs. The launch's relay keeps its store in
the launch's private run dir, and the station its job state beside it (``<run dir>/station_state``), so both go
with the launch (the run dir is removed when the launch process ends, however it ends, a SIGKILL included). A
station's state belongs to the relay that handed its jobs out: only that relay knows them. So:

* ``state_dir:=DIR`` keeps the station's jobs in DIR: a job a killed launch left unfinished resumes in the next
  launch given the same DIR (finished episodes are kept and never run again, episode ids are never reused) — a
  ``use_relay:=false`` job runs on; a relay job needs the relay it came from, so with the launch's own relay
  (a new one each launch) it ends FAILED, its policy never served;
* a ``relay_config_file`` naming a ``store`` (a relay whose jobs outlive the launch): the station's state is
  that station's for that relay, ``$XDG_STATE_HOME/strands_robots/<station_id>/relay-<listen address>-<hash>``
  (``station/state_dir.py``; give the relay a fixed ``port`` so each launch is the same relay);
* otherwise (the default, and ``use_relay:=false``): in the run dir, gone with the launch.

The launch's first line names the run dir and the state dir. A finished job is never new work: each launch
submits a new job.
The driver and rollout alone, with autorun episodes and no job: rollout_only.launch.py.
"""

import atexit
import os
import re
import signal

from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    ExecuteProcess,
    IncludeLaunchDescription,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    Shutdown,
    TimerAction,
)
from launch.event_handlers import OnProcessExit, OnProcessIO
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import ExecutableInPackage, FindPackageShare

from strands_robots.launch_support import end_launch_with, output_options

# The included files sit beside this one, installed and in the source tree alike.
_HERE = os.path.dirname(os.path.realpath(__file__))


class BadLaunchConfig(ValueError):
    """A config file or a launch argument of rollout.launch.py is refused (the file, the key and the reason)."""


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise BadLaunchConfig(f"{name}: expected true or false, got {text!r}")


def _arg(context, name: str) -> str:
    return LaunchConfiguration(name).perform(context)


def check_files(context) -> dict:
    """Check every config file before anything starts; the values the rest of the launch needs."""
    from strands_robots.cli.bringup import BadConfigFile, job_file_refusal, load_relay_config
    from strands_robots.cli.parameters_file import parameters_file_refusal
    from strands_robots.job_model.team_job import load_team_job

    use_relay = _flag("use_relay", _arg(context, "use_relay"))
    for name in ("config_file", "station_config_file"):
        reason = parameters_file_refusal(_arg(context, name))
        if reason:
            raise BadLaunchConfig(reason)
    relay = None
    if use_relay:
        try:
            relay = load_relay_config(_arg(context, "relay_config_file"))
        except BadConfigFile as exc:
            raise BadLaunchConfig(str(exc)) from None
    job_file = _arg(context, "job_file")
    reason = job_file_refusal(job_file)
    if reason:
        raise BadLaunchConfig(reason)
    spec = load_team_job(job_file)
    hz_text = _arg(context, "control_frequency")
    try:
        hz = float(hz_text) if hz_text else float(spec.control_frequency or 50.0)
    except ValueError:
        raise BadLaunchConfig(f"control_frequency: expected a number in Hz, got {hz_text!r}") from None
    if not 1.0 <= hz <= 2000.0:
        raise BadLaunchConfig(f"control_frequency: {hz:g} Hz is out of range [1, 2000]")
    return {"use_relay": use_relay, "relay": relay, "job_file": job_file, "spec": spec, "control_frequency": hz,
            "station_id": _arg(context, "station_id") or spec.station_id}


def _bring_up(context):
    from strands_robots.cli.bringup import launch_state_dir, make_run_dir, write_relay_credentials
    from strands_robots.cli.station_demo import free_port

    checked = check_files(context)
    namespace = _arg(context, "namespace")
    station_id = checked["station_id"]
    run = make_run_dir(station_id)  # removed when this process ends, however it ends
    atexit.register(run.close)  # the tokens, the relay's store and the station's state go with the launch
    hz = f"{checked['control_frequency']:.1f}"
    settings = checked["relay"]
    listen = f"{settings.host}:{settings.port or free_port()}" if checked["use_relay"] else ""
    state_dir = launch_state_dir(_arg(context, "state_dir"), run, station_id, settings, listen)
    station_args = {
        "config_file": _arg(context, "config_file"),
        "station_config_file": _arg(context, "station_config_file"),
        "namespace": namespace,
        "control_frequency": hz,
        "station_id": station_id,
        "state_dir": state_dir,
        "robot_name": _arg(context, "robot_name"),
        "recording_dir": _arg(context, "recording_dir"),
        "record": "true" if _arg(context, "recording_dir") else "",  # a directory given: record every rollout
        "suites_dir": _arg(context, "suites_dir"),
    }
    job = ["--job-file", checked["job_file"], "--station-id", station_id, "--control-frequency", hz]
    if _arg(context, "policy_provider"):
        job += ["--policy-provider", _arg(context, "policy_provider")]
    actions = []
    if checked["use_relay"]:
        # The station and rollout nodes read the relay and the station's token from one 0600 file at start.
        station_args["relay_credentials_file"] = write_relay_credentials(run.path, listen, station_id,
                                                                         run.station_token_file)
        actions.append(IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(_HERE, "relay.launch.py")),
            launch_arguments={"relay_config_file": _arg(context, "relay_config_file"), "tokens": run.tokens,
                              "listen": listen, "store": settings.store or run.store}.items(),
        ))
        job = ["--relay", listen, "--token-file", run.client_token_file] + job
        says = f"relay on {listen}; the demo job through the Evaluation Client"
    else:
        job = ["--ros", "--namespace", namespace] + job
        says = f"no relay; the demo job through /{namespace.strip('/')}/submit_job"
    actions.insert(0, LogInfo(msg=f"station {station_id} in /{namespace.strip('/')} at {hz} Hz; {says}; job file "
                                  f"{checked['job_file']}; private run dir {run.path}; job state in "
                                  f"{station_args['state_dir']}"))
    actions.append(IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(_HERE, "station.launch.py")),
        launch_arguments=station_args.items(),
    ))
    # Stopped on request (the launch's Ctrl-C), demo_job exits 0 like every node: "process has finished cleanly".
    client = ExecuteProcess(cmd=[ExecutableInPackage("demo_job", "strands_robots"), *job, "--stopped-exit-code", "0"],
                            name="demo_job", **output_options())
    stopped: dict = {}
    if _flag("exit_when_done", _arg(context, "exit_when_done")):
        on_exit = _end_with_job(end_launch_with("demo_job", "the job did not succeed"), stopped)
    else:
        on_exit = _stay_up
    return actions + [client, RegisterEventHandler(OnProcessIO(target_action=client,
                                                               on_stdout=lambda event: _note_stop(event, stopped))),
                      RegisterEventHandler(OnProcessExit(target_action=client, on_exit=on_exit))]


# demo_job's exit codes when a stop signal ended it without its handler (128 + the signal, or -signal).
_STOPPED = {128 + signal.SIGINT: "SIGINT", 128 + signal.SIGTERM: "SIGTERM", -signal.SIGINT: "SIGINT",
            -signal.SIGTERM: "SIGTERM"}
# The line demo_job prints when a stop signal ends it (cli/demo_job.py): it exits 0 then (--stopped-exit-code 0).
_STOPPED_LINE = re.compile(rb"\[demo_job\] stopped by signal (\d+) before ")


def _note_stop(event, stopped: dict) -> None:
    """Remember that demo_job said it was stopped by a signal (its exit, 0, then means stopped, not SUCCEEDED)."""
    found = _STOPPED_LINE.search(event.text)
    if found:
        stopped["signal"] = int(found.group(1))


def _end_with_job(end_launch, stopped: dict):
    """End the launch with demo_job: its exit code is the launch's, except after a stop signal.

    A terminal's Ctrl-C reaches demo_job and the launch at once, and demo_job may exit before the launch has
    handled its own SIGINT: then the launch's Ctrl-C is left to stop everything (exit 0, as for any Ctrl-C;
    demo_job's last line says the job was left unfinished). A Shutdown of ours as well would be a second one,
    which launch_ros answers with "Cannot shutdown a ROS adapter that is not running". When no Ctrl-C follows
    within ``_STOP_GRACE_S`` (demo_job alone was signalled), the launch ends then. demo_job says it was stopped
    (``stopped``, from its output) and exits 0, so its stop reads "process has finished cleanly".
    """

    def on_exit(event, context):
        if context.is_shutdown:
            return None
        signum = stopped.get("signal") or (abs(event.returncode) - (128 if event.returncode > 0 else 0)
                                           if event.returncode in _STOPPED else 0)
        if signum:
            reason = f"demo_job was stopped by {signal.Signals(signum).name} before the job ended"
            return [TimerAction(period=_STOP_GRACE_S, actions=[OpaqueFunction(
                function=lambda ctx: [] if ctx.is_shutdown else [Shutdown(reason=reason)])])]
        return end_launch(event, context)

    return on_exit


_STOP_GRACE_S = 3.0


def _stay_up(event, context):
    """``exit_when_done:=false``: the station stays up after the job (until Ctrl-C), saying how the job went."""
    if context.is_shutdown:
        return None
    how = "SUCCEEDED" if event.returncode == 0 else f"did not succeed (demo_job exit code {event.returncode})"
    return [LogInfo(msg=f"the job {how}; the station stays up until Ctrl-C (exit_when_done:=false)")]


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("strands_robots")
    args = [
        DeclareLaunchArgument("config_file", default_value=PathJoinSubstitution([share, "config", "rollout.yaml"]),
                              description="ROS parameters file for the arm driver and rollout nodes"),
        DeclareLaunchArgument("station_config_file",
                              default_value=PathJoinSubstitution([share, "config", "station.yaml"]),
                              description="ROS parameters file for the station node"),
        DeclareLaunchArgument("relay_config_file", default_value=PathJoinSubstitution([share, "config", "relay.yaml"]),
                              description="the relay's settings (use_relay:=true)"),
        DeclareLaunchArgument("job_file", default_value=PathJoinSubstitution([share, "config", "demo_job.yaml"]),
                              description="the evaluation job to run"),
        DeclareLaunchArgument("use_relay", default_value="true",
                              description="true: relay + Evaluation Client; false: the station's submit_job"),
        DeclareLaunchArgument("namespace", default_value="strands", description="namespace of the station's nodes"),
        DeclareLaunchArgument("robot_name", default_value="", description="robot name (empty: the config files')"),
        DeclareLaunchArgument("station_id", default_value="", description="station name (empty: the job file's)"),
        DeclareLaunchArgument("control_frequency", default_value="",
                              description="control rate in Hz (empty: the job file's)"),
        DeclareLaunchArgument("policy_provider", default_value="",
                              description="policy for the job's tasks: mock, scripted (empty: the job file's)"),
        DeclareLaunchArgument("recording_dir", default_value="",
                              description="record every rollout to MCAP in this directory (empty: no recording)"),
        DeclareLaunchArgument("suites_dir", default_value="",
                              description="the station's suites, one YAML each (empty: the package's config/suites)"),
        DeclareLaunchArgument("state_dir", default_value="",
                              description="the station's persisted jobs, kept across launches given the same dir "
                                          "(empty: in the launch's run dir, gone with the launch; with a relay "
                                          "store configured: the station's for that relay)"),
        DeclareLaunchArgument("exit_when_done", default_value="true",
                              description="true: the launch ends with the job (its exit code says how the job "
                                          "went); false: the station stays up until Ctrl-C"),
    ]
    return LaunchDescription(args + [OpaqueFunction(function=_bring_up, args=[])])
