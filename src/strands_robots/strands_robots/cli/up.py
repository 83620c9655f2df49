"""``strands-robots up``: a simulated station running a job, or (``--rollout``) the driver and rollout node alone.

Without ``--rollout`` it is :func:`strands_robots.cli.station_demo.run_demo` (a local relay, the three nodes and
the camera node rendering ``scene`` and ``wrist``, the demo job submitted and served through the relay) or, with
``--relay-credentials FILE`` (or ``--relay ADDR`` and the station's token in the environment variable
``STRANDS_ROBOTS_STATION_TOKEN``),
:func:`~strands_robots.cli.station_demo.run_station`. A token is never taken from the command line; one from the
environment is written to a private directory of this run that goes when this process goes, however it ends (a
SIGKILL included: :mod:`strands_robots.private_dir`). The station's job state then persists in ``--state-dir``,
by default the directory of this station and this relay,
``$XDG_STATE_HOME/strands_robots/<station_id>/relay-<relay address>-<hash>`` (``~/.local/state/...``;
:mod:`strands_robots.station.state_dir`), so a restarted ``up --relay`` against the same relay resumes its job
(finished episodes are not run again and episode ids are not reused), and one against another relay never
inherits it. The demo (no relay) keeps everything, its relay's store and its station's state, in a private
directory of its own run: each run is a new relay with a new job, never an old one.

With ``--rollout`` it brings up the arm driver and the rollout node as child processes, runs their episodes and
gives one verdict. The nodes get the same parameters file as rollout_only.launch.py. They run under a
:class:`~strands_robots.supervisor.Supervisor`, so they die with this process however it dies. The exit code is
the rollout node's (0 only when every episode asked for ended ok and was seen to), 128 + the signal after
Ctrl-C or SIGTERM, 2 for a bad command line or parameters file. A failed run never prints ``done``.
"""

from __future__ import annotations

import argparse
import sys
import time

from strands_robots.client.cli import argv_secrets
from strands_robots.ros.tools import ros_env_check, subscribe_events
from strands_robots.cli.stream import StreamPrinter
from strands_robots.supervisor import Supervisor

EXIT_USAGE = 2
LAST_EVENTS_WAIT_S = 2.0  # after the rollout exits, how long its last events may take to reach us


def default_config_file() -> str:
    """Return the package's ``config/rollout.yaml`` (installed or in the checkout: ``package_files``)."""
    from strands_robots.package_files import config_path

    return config_path("rollout.yaml")


def node_argv(module: str, name: str, namespace: str, params_file: str, overrides: dict) -> list:
    argv = [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}"]
    if namespace:
        argv += ["-r", f"__ns:=/{namespace.strip('/')}"]
    argv += ["--params-file", params_file]
    for key, value in overrides.items():
        argv += ["-p", f"{key}:={value}"]
    return argv


def _with_env(extra: dict) -> "dict | None":
    """Return this process's environment plus ``extra`` (None when there is nothing to add: the default)."""
    import os

    return dict(os.environ, **extra) if extra else None


def _say(text: str) -> None:
    """Print one line in one write, so the children's output (printed by other threads) cannot split it."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _usage_error(text: str) -> int:
    print(f"strands-robots up: {text}", file=sys.stderr, flush=True)
    return EXIT_USAGE


_ROLLOUT_ONLY = ("config_file", "policy", "control_frequency", "duration", "episodes")
_ROLLOUT_DEFAULTS = {"policy": "mock", "control_frequency": 50.0, "duration": 5.0, "episodes": 1}
_STATION_ONLY = ("job_file", "relay", "relay_credentials", "station_id", "state_dir", "record")
TOKEN_ENV = argv_secrets.STATION_TOKEN_ENV
PRIVATE_DIR_PREFIX = "strands_up_"


def arms_setup(args: argparse.Namespace) -> "tuple[dict, dict, str]":
    """Return the driver's parameters and environment for ``--hardware``, ``--controller-manager``, ``--arms-config``.

    Returns ``(parameters, environment additions, refusal)``; the refusal is empty when the options fit.
    """
    import os

    from strands_robots.package_files import PackageFileNotFound, config_path

    hardware = getattr(args, "hardware", None) or "mujoco"
    manager = getattr(args, "controller_manager", None)
    arms_config = getattr(args, "arms_config", None)
    if manager and hardware != "ros2_control":
        return {}, {}, "--controller-manager goes with --hardware ros2_control"
    params: dict = {}
    env: dict = {}
    if hardware != "mujoco":
        params["hardware"] = hardware
    if hardware == "ros2_control" and not arms_config:
        try:
            arms_config = config_path("ros2_control/arms.yaml")
        except PackageFileNotFound as exc:
            return {}, {}, str(exc)
    if arms_config:
        if not os.path.isfile(arms_config):
            return {}, {}, f"--arms-config {arms_config}: no such file"
        params["config_file"] = os.path.abspath(arms_config)
    if manager:
        from strands_robots.arm.ros2_control import CONTROLLER_MANAGER_ENV

        env[CONTROLLER_MANAGER_ENV] = manager
    return params, env, ""


def _compare_file(args: argparse.Namespace) -> "str | None":
    """Return the comparison job after the demo job: --no-compare none, --compare-file FILE, else the default."""
    if getattr(args, "no_compare", False):
        return ""
    return getattr(args, "compare_file", None)


def cmd_up(args: argparse.Namespace) -> int:
    """Run the simulated station (default), the station taking jobs from a relay, or ``--rollout``."""
    driver_params, driver_env, refusal = arms_setup(args)
    if refusal:
        return _usage_error(refusal)
    args.driver_params, args.driver_env = driver_params, driver_env
    if not args.rollout:
        given = [f"--{name.replace('_', '-')}" for name in _ROLLOUT_ONLY if getattr(args, name) is not None]
        if given or args.every_step:
            return _usage_error(f"{', '.join(given or ['--every-step'])}: only with --rollout (the station runs "
                                "the job's own settings)")
        return _station(args)
    given = [f"--{name.replace('_', '-')}" for name in _STATION_ONLY if getattr(args, name) is not None]
    if given:
        return _usage_error(f"{', '.join(given)}: not with --rollout")
    for name, default in _ROLLOUT_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.config_file = args.config_file or ""
    args.namespace = args.namespace or "strands"
    return _rollout(args)


def _station(args: argparse.Namespace) -> int:
    import os

    if args.relay and args.relay_credentials:
        return _usage_error("--relay and --relay-credentials: give one (the credentials file names the relay)")
    token = os.environ.get(TOKEN_ENV, "").strip()
    if args.relay and not token:
        return _usage_error(f"--relay needs the station's token in {TOKEN_ENV} (or use --relay-credentials FILE)")
    if args.record and (args.relay or args.relay_credentials):
        return _usage_error("--record: only for the demo job (beside a station taking jobs, run strands-robots "
                            "record)")
    if (args.station_id or args.state_dir) and not (args.relay or args.relay_credentials):
        return _usage_error("--station-id and --state-dir go with --relay or --relay-credentials (the demo keeps "
                            "its state in its own temporary directory)")
    from strands_robots.cli import station_demo
    from strands_robots.private_dir import PrivateDir
    from strands_robots.wire.credentials import CredentialsError, load_relay_credentials
    from strands_robots.station.state_dir import station_state_dir

    namespace = args.namespace or "station"
    if not (args.relay or args.relay_credentials):
        ros_env_check("up")
        return station_demo.run_demo(args.job_file, namespace=namespace, quiet_nodes=not args.verbose,
                                     record=args.record, driver_params=args.driver_params,
                                     driver_env=args.driver_env, compare_file=_compare_file(args))
    # 0700, removed when this process ends however it ends: the token file written from the environment
    with PrivateDir(PRIVATE_DIR_PREFIX) as private:
        credentials_file = args.relay_credentials
        if args.relay:
            from strands_robots.cli.bringup import write_relay_credentials

            token_file = os.path.join(private.path, "station_token")
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(token)
            credentials_file = write_relay_credentials(private.path, args.relay, args.station_id or
                                                       station_demo.DEMO_STATION, token_file)
        try:
            credentials = load_relay_credentials(credentials_file)
        except CredentialsError as exc:
            return _usage_error(str(exc))
        if args.station_id and args.station_id != credentials.station_id:
            return _usage_error(f"--station-id {args.station_id}: the credentials file is for station "
                                f"{credentials.station_id}")
        ros_env_check("up")
        state_dir = args.state_dir or station_state_dir(credentials.station_id, credentials.targets)
        return station_demo.run_station(credentials_file, namespace=namespace, state_dir=state_dir,
                                        driver_params=args.driver_params, driver_env=args.driver_env)


def _rollout(args: argparse.Namespace) -> int:
    if args.episodes < 1:
        return _usage_error(f"--episodes {args.episodes}: nothing to run (ask for at least 1 episode)")
    for flag, value in (("--duration", args.duration), ("--control-frequency", args.control_frequency)):
        if not value > 0:
            return _usage_error(f"{flag} {value:g}: must be greater than 0")
    ros_env_check("up")
    from strands_robots.cli.parameters_file import unknown_parameters_error
    from strands_robots.ros.process import params_file_error

    from strands_robots.package_files import PackageFileNotFound

    try:
        config = args.config_file or default_config_file()
    except PackageFileNotFound as exc:
        return _usage_error(str(exc))
    reason = params_file_error(config) or unknown_parameters_error(config)
    if reason:
        return _usage_error(reason)
    return _run(args, config)


def _run(args: argparse.Namespace, config: str) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.ros.process import (
        EXIT_BAD_PARAMETERS,
        StopSignals,
        init_without_signal_handlers,
        spin_in_background,
    )

    printer = StreamPrinter(every_step=args.every_step, expected_episodes=args.episodes)
    sup = Supervisor()
    # Ours, not rclpy's: rclpy's handler would shut our context down (no more events) mid-run. Every further
    # SIGINT/SIGTERM while the nodes stop is taken too (a terminal and a launcher may both send one).
    with StopSignals() as signals:
        init_without_signal_handlers(["strands-robots"])
        node = rclpy.create_node("strands_robots_up")
        subscribe_events(node, args.namespace, printer)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = spin_in_background(executor, "up-executor")
        why = ""
        failure_code = None
        rollout_rc = None
        try:
            _say(f"[up] config {config}; namespace /{args.namespace}; policy {args.policy}; "
                 f"{args.control_frequency:g} Hz; {args.duration:g} s x {args.episodes} episode(s)")
            driver = sup.start("arm_driver", node_argv(
                "strands_robots.nodes.arm_driver.node", "arm_driver", args.namespace, config,
                {"control_rate_hz": args.control_frequency, "autostart": "true", **args.driver_params},
            ), env=_with_env(args.driver_env))
            rollout = sup.start("rollout", node_argv(
                "strands_robots.nodes.rollout.node", "rollout", args.namespace, config,
                {
                    "control_frequency": args.control_frequency,
                    "policy_provider": args.policy,
                    "duration_s": args.duration,
                    "autorun_episodes": args.episodes,
                    "exit_after_autorun": "true",
                    "autorun_wait_subscribers": 1,  # this process's observer_events subscriber sees every event
                },
            ))
            while rollout.poll() is None and not signals.event.is_set():
                if driver.poll() is not None:
                    why = ("the arm driver refused its parameters (its line above says why)"
                           if driver.returncode == EXIT_BAD_PARAMETERS
                           else f"the arm driver exited with {driver.returncode} during the run")
                    failure_code = EXIT_BAD_PARAMETERS if driver.returncode == EXIT_BAD_PARAMETERS else 1
                    break
                signals.event.wait(0.1)
            rollout_rc = rollout.poll()
            if rollout_rc is not None and not signals.event.is_set():
                # The rollout published its last Ended before it exited; give DDS a moment to deliver it.
                deadline = time.monotonic() + LAST_EVENTS_WAIT_S
                while len(printer.ended) < printer.started and time.monotonic() < deadline:
                    time.sleep(0.02)
            if signals.event.is_set():
                name = "Ctrl-C" if signals.signum == 2 else f"signal {signals.signum}"
                _say(f"\n[up] {name}: stopping the nodes")
        finally:
            sup.stop_all(first=("rollout",))  # its lease goes back to a driver that still answers
            # A stopped rollout published its last Ended before it exited: taken before the executor stops (a
            # Ctrl-C run under load printed no Ended line, the sample still waiting for this executor).
            deadline = time.monotonic() + LAST_EVENTS_WAIT_S
            while len(printer.ended) < printer.started and time.monotonic() < deadline:
                time.sleep(0.02)
            # The spin thread must be out of rclpy's wait before the node and context go, or the process can
            # abort at exit ("terminate called without an active exception", SIGABRT).
            spinner.stop(5.0)
            node.destroy_node()
            rclpy.try_shutdown()
    if signals.signum:
        return 128 + signals.signum
    return _verdict(printer, args.episodes, rollout_rc, why, failure_code, EXIT_BAD_PARAMETERS)


def _verdict(printer: StreamPrinter, episodes: int, rollout_rc, why: str, failure_code, bad_parameters_rc: int) -> int:
    """Print the last line and return the exit code.

    Success only when the rollout exited 0 and every episode asked for was seen to end ok. ``why`` (with
    ``failure_code``) is a failure already known, e.g. the driver died.
    """
    ok = [e for e in printer.ended if e.outcome == "ok"]
    counts = (f"{len(printer.ended)}/{episodes} episode(s) ended, {len(ok)} ok, {printer.events} events received, "
              f"{printer.gaps} lost (event_seq gaps)")
    if not why and rollout_rc == bad_parameters_rc and not printer.ended:
        why = "the rollout node refused its parameters (its line above says why)"
    if not why and rollout_rc != 0:
        failed = [e for e in printer.ended if e.outcome != "ok"]
        if failed:
            detail = " ".join(failed[0].end_detail.split())
            why = f"{failed[0].outcome}: {failed[0].stopped_reason}" + (f", {detail[:200]}" if detail else "")
        else:
            why = f"the rollout node exited with {rollout_rc}"
    if not why and len(ok) < episodes and (printer.started < episodes or len(printer.ended) > len(ok)):
        why = f"only {len(ok)} of {episodes} episode(s) were seen to end ok"
    if not why and len(ok) < episodes:
        # Every episode started and none was seen to fail; the rollout, which knows, exited 0. The Ended events
        # that never arrived were lost on the way (the rollout exited before DDS delivered them).
        _say(f"[up] done: the rollout reports {episodes}/{episodes} episode(s) ok, but only {len(ok)} Ended "
             f"event(s) arrived; {printer.events} events received, {printer.gaps} lost (event_seq gaps); "
             "rollout exit code 0")
        return 0
    if why:
        code = failure_code or (rollout_rc if rollout_rc not in (None, 0) else 1)
        rollout = "still running when stopped" if rollout_rc is None else str(rollout_rc)
        _say(f"[up] FAILED ({why}): {counts}; rollout exit code {rollout}")
        return code
    _say(f"[up] done: {len(ok)}/{episodes} episode(s) ended ok, {printer.events} events received, "
         f"{printer.gaps} lost (event_seq gaps); rollout exit code 0")
    return 0
