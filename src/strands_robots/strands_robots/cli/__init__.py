"""``strands-robots``: the package set's command line, usable without ``ros2``.

``strands-robots up [--job-file F] [--record FILE] [--relay-credentials FILE | --relay ADDR] [--state-dir D]``
  A simulated station: with no ``--relay``, a local relay, the arm driver, rollout and station nodes, the demo
  job submitted through the Evaluation Client and its policy served through the relay, a progress bar of
  finished episodes and the summary table (exit 0 when the job SUCCEEDED); with ``--relay``, the station takes
  jobs from that relay until Ctrl-C (credentials from a 0600 file, or the token in STRANDS_ROBOTS_STATION_TOKEN;
  its job state persists in --state-dir, by default $XDG_STATE_HOME/strands_robots/<station_id>). Every node
  dies with this command however it dies.
``strands-robots up --rollout [--policy mock] [--control-frequency 50] [--duration 5] [--episodes 1]``
  Only the arm driver and the rollout node, from the same config file as rollout_only.launch.py (for machines where
  ``launch`` is missing): run the episodes, print the observer stream as it goes, and exit with the rollout
  node's exit code (1 after an error or a safety stop). Ctrl-C stops both nodes cleanly.
``strands-robots echo [--namespace strands] [--steps | --gaps | --summary] [--runs N]``
  Print the observer stream of a running rollout node, one line per event (or one per second of steps);
  ``--gaps`` only the event_seq gaps, ``--summary`` per-run resolution and deadline figures.
``strands-robots demo [--policy mock] [--duration 2] [--control-frequency 50]``
  One rollout in this process with no ROS at all: ``Simulation.run_policy(..., observer=...)``, the observer
  lane printed as it goes (``up --rollout`` is the same over ROS, with the driver and rollout nodes).
``strands-robots station ...``
  Another name of ``up`` (the same command and options).
``strands-robots relay --store sqlite:PATH --tokens FILE [--listen 127.0.0.1:50051]``
  The relay between stations and Evaluation Clients (``strands_robots.relay.server``).
``strands-robots relay tokens add NAME --client|--station --tokens FILE``
  A team's or a station's new token in the tokens file, and its 0600 token or credentials file
  (``strands_robots.relay.token_entries``).
``strands-robots job submit|status|watch|cancel|serve|list|suites|recordings|leaderboard|schema ...``
  A team's Evaluation Client against a relay, from the command line: the very code of the client's own
  ``strands-eval`` (``strands_robots.client.cli.job``).
``strands-robots demo-job (--relay ADDR --token-file T | --ros [--namespace N]) [--job-file F]``
  The job process of rollout.launch.py (the ``demo_job`` executable): submit a job file, watch it to its end and
  print the summary, its exit code the launch's (0 when the job SUCCEEDED); through the relay as the Evaluation
  Client, or through the station's submit_job service with no relay (``strands_robots.cli.demo_job``). By hand,
  a team uses ``job``; ``demo-job --ros`` is the one way to run a job file on a station without a relay.
``strands-robots record | report | monitor | foxglove ...``
  Monitoring (``strands_robots.monitoring``): MCAP recording, plots, the monitor window, the Foxglove live view.
``strands-robots rescore RECORDING.mcap...``
  Every recorded episode's success at the end and ever, and its score, recomputed from the recorded predicate
  inputs and sheet, printed beside the live ones; exit 1 when any differs (``strands_robots.monitoring.rescore``).
``strands-robots export lerobot RECORDING.mcap... -o DIR [--fps N]``
  A LeRobotDataset v3 from episode recordings (``strands_robots.export.command``, a sub-command per format).

Every command's ``--help`` names each option with its default and unit; an unknown option exits 2 with the usage
of the command it was given to (``strands_robots.client.cli.parse_command``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass, field
from typing import Sequence

from strands_robots.client.cli import argv_secrets
from strands_robots.cli.demo import cmd_demo
from strands_robots.cli.echo import cmd_echo
from strands_robots.cli.up import cmd_up, default_config_file, node_argv

__all__ = ["build_parser", "main", "default_config_file", "node_argv", "DELEGATED", "delegated_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots", allow_abbrev=False,
                                     description="The package set's command line, usable without ros2.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser(
        "up", aliases=["station"], allow_abbrev=False,
        help="bring up a simulated station (relay, driver, rollout, station) and run the demo job; "
             "--relay: take jobs from a relay; --rollout: only the driver and the rollout node",
        description="Without options: a local relay, the arm driver, rollout and station nodes, the demo job "
                    "submitted and its policy served through the relay, a progress bar and the summary (exit 0 "
                    "when the job SUCCEEDED). --relay-credentials FILE (or --relay ADDR with the token in "
                    "STRANDS_ROBOTS_STATION_TOKEN): the station takes jobs from that relay until Ctrl-C. "
                    "--rollout: only the driver and the rollout node, running --episodes "
                    "episodes of --policy (exit 1 after an error or a safety stop).")
    up.add_argument("--namespace", default=None, help="ROS namespace of the nodes (default: station, or strands "
                                                      "with --rollout)")
    station = up.add_argument_group("station (the default)")
    station.add_argument("--job-file", default=None, help="the job to run (default: the package's demo_job.yaml)")
    station.add_argument("--relay-credentials", default=None, metavar="FILE",
                         help="the station's 0600 relay credentials file (relay, station id, token): take jobs "
                              "from that relay (no local relay)")
    station.add_argument("--relay", default=None, help="HOST:PORT of a relay to take jobs from, the station's token "
                                                       "in STRANDS_ROBOTS_STATION_TOKEN")
    station.add_argument("--station-id", default=None, help="with --relay: this station's id (default sim_station)")
    station.add_argument("--state-dir", default=None,
                         help="with a relay: where job state persists (default $XDG_STATE_HOME/strands_robots/<id>)")
    station.add_argument("--compare-file", default=None, metavar="FILE",
                         help="the comparison job run after the demo job (default: the package's "
                              "demo_compare.yaml after the default demo job; none after --job-file)")
    station.add_argument("--no-compare", action="store_true", help="run no comparison job after the demo job")
    station.add_argument("--record", default=None, metavar="FILE",
                         help="the demo job: record all of it to this MCAP file (strands-robots record beside the "
                              "nodes, matched before the job is submitted; closed before the comparison)")
    station.add_argument("--verbose", action="store_true", help="print every node's output")
    arms = up.add_argument_group("the arms (the station and --rollout)")
    arms.add_argument("--hardware", default=None,
                      help="the arm driver's hardware: mujoco (default, simulated) or ros2_control (a running "
                           "controller_manager; docs/hardware.md)")
    arms.add_argument("--controller-manager", default=None, metavar="NS",
                      help="with --hardware ros2_control: the controller_manager's namespace or node name (default: "
                           "the arms config's, /controller_manager)")
    arms.add_argument("--arms-config", default=None, metavar="FILE",
                      help="the driver's arms.yaml (default: the package's; with --hardware ros2_control "
                           "config/ros2_control/arms.yaml, the demo description's joints)")
    rollout = up.add_argument_group("--rollout: the driver and the rollout node only")
    rollout.add_argument("--rollout", action="store_true", help="bring up only the driver and the rollout node")
    rollout.add_argument("--config-file", default=None,
                         help="ROS parameters file (default: the package's rollout.yaml)")
    rollout.add_argument("--policy", default=None, help="policy provider: mock (default), replay, scripted")
    rollout.add_argument("--control-frequency", type=float, default=None, help="control rate in Hz (default 50)")
    rollout.add_argument("--duration", type=float, default=None, help="episode budget in seconds (default 5)")
    rollout.add_argument("--episodes", type=int, default=None, help="episodes to run (default 1)")
    rollout.add_argument("--every-step", action="store_true", help="print every step, not one line per second")
    up.set_defaults(func=cmd_up)

    echo = sub.add_parser("echo", help="print a running rollout node's observer stream",
                          description="Print the observer stream of a running rollout node, one line per event (or "
                                      "one per second of steps), until Ctrl-C or --runs runs ended.")
    echo.add_argument("--namespace", default="strands", help="the rollout node's namespace (default %(default)s)")
    shown = echo.add_mutually_exclusive_group()
    shown.add_argument("--steps", action="store_true", help="print every step")
    shown.add_argument("--gaps", action="store_true",
                       help="print only event_seq gaps (and a count at the end); exit 1 when events were lost")
    shown.add_argument("--summary", action="store_true",
                       help="one line per run as it ends: resolution counts, full rate, missed deadlines, "
                            "step interval deviation, observation age, hook outcomes, events lost")
    echo.add_argument("--runs", type=int, default=0, help="exit after this many runs ended (0: until Ctrl-C)")
    echo.set_defaults(func=cmd_echo)

    demo = sub.add_parser("demo", help="one rollout in this process, no ROS (the observer lane printed)",
                          description="One rollout in this process with no ROS at all, the observer lane printed as "
                                      "it goes (up --rollout is the same over ROS).")
    demo.add_argument("--policy", default="mock", help="policy provider: mock, replay, scripted (default %(default)s)")
    demo.add_argument("--control-frequency", type=float, default=50.0, help="control rate in Hz (default %(default)s)")
    demo.add_argument("--duration", type=float, default=2.0, help="episode budget in seconds (default %(default)s)")
    demo.add_argument("--episodes", type=int, default=1, help="episodes to run (default %(default)s)")
    demo.add_argument("--every-step", action="store_true", help="print every step, not one line per second")
    demo.set_defaults(func=cmd_demo)

    # Commands whose own module parses their arguments (they keep one parser each, usable as `python -m`).
    for name, command in DELEGATED.items():
        delegated = sub.add_parser(name, help=command.help, add_help=False)
        delegated.add_argument("args", nargs=argparse.REMAINDER, help=f"{name}'s own arguments ({name} --help)")
        delegated.set_defaults(delegated=name)
    from strands_robots.client.cli.job import add_job_parser

    add_job_parser(sub)
    return parser


@dataclass(frozen=True)
class Delegated:
    """A command whose module parses its own arguments: ``module``'s ``main(argv)`` and ``build_parser()``.

    ``commands``: its own sub-commands, each another module's (``relay tokens``), chosen by the first argument.
    ``named``: the module's main and parser take the command's name (``prog``), the module being an executable
    of its own too.
    """

    help: str
    module: str
    commands: "dict[str, str]" = field(default_factory=dict)
    named: bool = False


DELEGATED = {
    "relay": Delegated("the relay between stations and Evaluation Clients (gRPC); relay tokens add NAME "
                       "--client|--station: a new token", "strands_robots.relay.server",
                       commands={"tokens": "strands_robots.relay.token_entries"}),
    "demo-job": Delegated("rollout.launch.py's job process: submit a job file (relay or the station's submit_job "
                          "service), watch it, print the summary, exit 0 on SUCCEEDED (a team uses `job`)",
                          "strands_robots.cli.demo_job", named=True),
    "record": Delegated("record every strands topic and camera to MCAP (rosbag2 conventions, latched state first); "
                        "--foxglove serves them live", "strands_robots.monitoring.record"),
    "report": Delegated("PNG plots from recordings: one per episode and a job summary; camera contact sheets and "
                        "MP4s", "strands_robots.monitoring.report"),
    "monitor": Delegated("the station monitor window (the rqt_strands_robots widget; PyQt5 where rqt is absent)",
                         "strands_robots.monitoring.monitor_app"),
    "foxglove": Delegated("serve the live strands topics to Foxglove over WebSocket (127.0.0.1 by default)",
                          "strands_robots.monitoring.foxglove_live"),
    "rescore": Delegated("recompute every recorded episode's success (at the end, ever) and score from the "
                         "recorded predicate inputs, beside the live ones; exit 1 when any differs",
                         "strands_robots.monitoring.rescore"),
    "export": Delegated("datasets from recordings: export lerobot RECORDING.mcap... -o DIR [--fps N] "
                        "(LeRobotDataset v3)", "strands_robots.export.command"),
}


def _module_of(name: str, argv: "Sequence[str]") -> "tuple[str, list[str], str]":
    """Return the module running ``strands-robots NAME argv``, the arguments it is given and its command name."""
    command, argv = DELEGATED[name], list(argv)
    if argv[:1] and argv[0] in command.commands:
        return command.commands[argv[0]], argv[1:], f"strands-robots {name} {argv[0]}"
    return command.module, argv, f"strands-robots {name}"


def delegated_parser(name: str, sub_command: str = "") -> argparse.ArgumentParser:
    """Return the parser of ``strands-robots NAME [SUB_COMMAND]``, a command whose own module parses it."""
    module, _, prog = _module_of(name, [sub_command] if sub_command else [])
    build = importlib.import_module(module).build_parser
    return build(prog) if DELEGATED[name].named else build()


def _delegate(name: str, argv: "list[str]") -> int:
    module, argv, prog = _module_of(name, argv)
    run = importlib.import_module(module).main
    return int((run(argv, prog) if DELEGATED[name].named else run(argv)) or 0)


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run one command; argv None: the ``strands-robots`` process itself (it ignores stop signals at the end)."""
    if argv is not None:
        return _main(list(argv))
    try:
        return _main(sys.argv[1:])
    finally:
        # The command is done; the process only exits now. A late Ctrl-C (a terminal's second one, a launcher's
        # after it) must not end it in a traceback: every command's own handlers are gone by here.
        from strands_robots.stop_signals import ignore_until_exit

        ignore_until_exit()


def _main(argv: "list[str]") -> int:
    refused = argv_secrets.refusal(argv)
    if refused:  # before any parser: no command takes a secret on argv (cli/argv_secrets.py)
        print(refused, file=sys.stderr, flush=True)
        return 2
    if argv and argv[0] in DELEGATED:
        return _delegate(argv[0], argv[1:])
    from strands_robots.client.cli.parse_command import parse_command

    args = parse_command(build_parser(), argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
