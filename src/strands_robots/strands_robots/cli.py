"""``strands-robots``: the package set's command line, usable without ``ros2``.

    strands-robots up [--namespace strands] [--policy mock] [--control-frequency 50] [--duration 5] [--episodes 1]
        Bring up the arm driver and the rollout node from the same config file as rollout.launch.py (for machines
        where ``launch`` is missing), run the episodes, print the observer stream as it goes, and exit with the
        rollout node's exit code. Ctrl-C stops both nodes cleanly.
    strands-robots echo [--namespace strands] [--steps]
        Print the observer stream of a running rollout node, one line per event (or a summary per second).
    strands-robots demo [--policy mock] [--duration 2] [--control-frequency 50]
        The in-process observer lane: ``Simulation.run_policy(..., observer=...)`` with no ROS at all.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence


def _package_share() -> Path:
    """The installed share dir of strands_robots, or the source tree when running from a checkout."""
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("strands_robots"))
    except Exception:  # not installed / no ament index: use the source tree
        return Path(__file__).resolve().parent.parent


def default_config_file() -> str:
    return str(_package_share() / "config" / "rollout.yaml")


# ----------------------------------------------------------------------------------------------- event printing
class StreamPrinter:
    """Formats observer events (core dataclasses) as progress lines; counts what it saw."""

    def __init__(self, out=sys.stdout, every_step: bool = False, progress_period_s: float = 1.0) -> None:
        self.out = out
        self.every_step = every_step
        self.period = progress_period_s
        self.events = 0
        self.gaps = 0
        self.ended: list = []
        self._last_seq: dict[str, int] = {}
        self._last_print = 0.0
        self._counts: dict[str, int] = {}

    def __call__(self, event) -> None:
        from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep

        self.events += 1
        last = self._last_seq.get(event.run_id)
        expected = 0 if last is None else last + 1
        if event.event_seq != expected:
            self.gaps += event.event_seq - expected
            self._line(f"!! gap in {event.run_id}: expected event_seq {expected}, got {event.event_seq}")
        self._last_seq[event.run_id] = event.event_seq
        if isinstance(event, RunPolicyStarted):
            self._counts = {}
            self._line(
                f"Started  run_id={event.run_id} robot={event.robot_name} policy={event.policy} "
                f"{event.control_frequency:g} Hz budget={event.total_steps} steps horizon={event.action_horizon} "
                f"async={event.async_rtc} episode {event.episode_index + 1}/{event.n_episodes}"
            )
        elif isinstance(event, RunPolicyStep):
            self._counts[event.action_resolution] = self._counts.get(event.action_resolution, 0) + 1
            now = time.monotonic()
            if self.every_step or event.action_resolution != "full" or now - self._last_print >= self.period:
                self._last_print = now
                extra = ""
                if event.unresolved_action_keys:
                    pairs = ", ".join(
                        f"{k}:{r}" for k, r in zip(event.unresolved_action_keys, event.unresolved_action_reasons)
                    )
                    extra = f" unresolved=[{pairs}]"
                if event.action_error:
                    extra += f" error={event.action_error!r}"
                self._line(
                    f"Step     #{event.applied_action_index:<6} t={event.elapsed_s:7.3f}s "
                    f"sim={event.sim_time_s:7.3f}s {event.action_resolution:<7} age={event.observation_age_steps} "
                    f"hook={event.legacy_hook_outcome} counts={self._counts}{extra}"
                )
        elif isinstance(event, RunPolicyEnded):
            self.ended.append(event)
            detail = f" detail={event.end_detail!r}" if event.end_detail else ""
            err = f" error={event.error_type}: {event.error_message}" if event.error_type else ""
            self._line(
                f"Ended    run_id={event.run_id} outcome={event.outcome} stopped_reason={event.stopped_reason} "
                f"applied={event.applied_actions} full/partial/none/unknown="
                f"{event.full_count}/{event.partial_count}/{event.none_count}/{event.unknown_count} "
                f"missed_deadlines={event.missed_deadlines} observer_failures={event.observer_failures} "
                f"elapsed={event.elapsed_s:.3f}s{detail}{err}"
                + (f" recording={event.recording_path} ({event.recorded_frames} frames)" if event.recording_path else "")
            )

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


# --------------------------------------------------------------------------------------------------------- demo
def cmd_demo(args: argparse.Namespace) -> int:
    from strands_robots.simulation import Simulation

    sim = Simulation()
    sim.add_robot("alice")
    printer = StreamPrinter(every_step=args.every_step)
    result = sim.run_policy(
        robot_name="alice",
        policy_provider=args.policy,
        duration=args.duration,
        control_frequency=args.control_frequency,
        observer=printer,
        n_episodes=args.episodes,
    )
    print(f"result: status={result['status']} episodes={len(result['episodes'])} "
          f"observer_failures={result['observer_failures']}")
    return 0 if result["status"] == "success" else 1


# --------------------------------------------------------------------------------------------------------- echo
def _ros_env_check() -> None:
    try:
        import rclpy  # noqa: F401
        import strands_robots_msgs.msg  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"strands-robots: ROS 2 is not importable ({exc}); run `source scripts/env.sh` first")


def _subscribe_events(node, namespace: str, printer: StreamPrinter):
    from strands_robots_msgs.msg import ObserverEvent

    from strands_robots.convert import msg_to_event
    from strands_robots.nodes._qos import EVENT_QOS

    topic = f"/{namespace.strip('/')}/observer_events" if namespace.strip("/") else "/observer_events"
    return node.create_subscription(ObserverEvent, topic, lambda msg: printer(msg_to_event(msg)), EVENT_QOS)


def cmd_echo(args: argparse.Namespace) -> int:
    _ros_env_check()
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init()
    node = rclpy.create_node("strands_robots_echo")
    printer = StreamPrinter(every_step=args.steps)
    _subscribe_events(node, args.namespace, printer)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


# ----------------------------------------------------------------------------------------------------------- up
class Supervisor:
    """Runs node processes, prefixes their output, stops them all (SIGINT, then SIGTERM, then SIGKILL)."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self._threads: list[threading.Thread] = []

    def start(self, name: str, argv: Sequence[str]) -> subprocess.Popen:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            start_new_session=True,  # Ctrl-C reaches us only; we forward it in order
        )
        self.procs[name] = proc
        t = threading.Thread(target=self._pump, args=(name, proc), daemon=True)
        t.start()
        self._threads.append(t)
        return proc

    @staticmethod
    def _pump(name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"[{name}] {line.rstrip()}", flush=True)

    def stop_all(self, grace_s: float = 5.0) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                break
            for p in alive:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace_s
            for p in alive:
                try:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        for t in self._threads:
            t.join(timeout=1.0)


def node_argv(module: str, name: str, namespace: str, params_file: str, overrides: dict) -> list[str]:
    argv = [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}"]
    if namespace:
        argv += ["-r", f"__ns:=/{namespace.strip('/')}"]
    argv += ["--params-file", params_file]
    for key, value in overrides.items():
        argv += ["-p", f"{key}:={value}"]
    return argv


def cmd_up(args: argparse.Namespace) -> int:
    _ros_env_check()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.nodes.process import init_without_signal_handlers

    config = args.config_file or default_config_file()
    if not Path(config).is_file():
        raise SystemExit(f"strands-robots up: config file not found: {config}")
    sup = Supervisor()
    rc = 1
    printer = StreamPrinter(every_step=args.every_step)
    signalled: list = []

    def interrupt(signum: int, _frame: object) -> None:
        # Ours, not rclpy's: rclpy's handler would shut our context down (no more events) and, when SIGINT was
        # ignored at start (a background job), never raise KeyboardInterrupt. A second one does not cut the
        # shutdown short.
        if not signalled:
            signalled.append(signum)
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    init_without_signal_handlers([sys.argv[0]])
    node = rclpy.create_node("strands_robots_up")
    _subscribe_events(node, args.namespace, printer)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, name="up-executor", daemon=True)
    spinner.start()
    interrupted = False
    try:
        print(f"[up] config {config}; namespace /{args.namespace}; policy {args.policy}; "
              f"{args.control_frequency:g} Hz; {args.duration:g} s x {args.episodes} episode(s)", flush=True)
        sup.start("arm_driver", node_argv(
            "strands_robots.nodes.arm_driver_node", "arm_driver", args.namespace, config,
            {"control_rate_hz": args.control_frequency, "autostart": "true"},
        ))
        rollout = sup.start("rollout", node_argv(
            "strands_robots.nodes.rollout_node", "rollout", args.namespace, config,
            {
                "control_frequency": args.control_frequency,
                "policy_provider": args.policy,
                "duration_s": args.duration,
                "autorun_episodes": args.episodes,
                "exit_after_autorun": "true",
                "autorun_wait_subscribers": 1,  # this process's observer_events subscriber sees every event
            },
        ))
        while rollout.poll() is None:
            driver = sup.procs["arm_driver"]
            if driver.poll() is not None:
                print(f"[up] arm driver exited with {driver.returncode}; stopping", flush=True)
                break
            time.sleep(0.1)
        rc = rollout.returncode if rollout.returncode is not None else 1
    except KeyboardInterrupt:
        interrupted = True
        signum = signalled[0] if signalled else signal.SIGINT
        print(f"\n[up] {'Ctrl-C' if signum == signal.SIGINT else signal.Signals(signum).name}: stopping the nodes",
              flush=True)
        rc = 128 + int(signum)
    finally:
        time.sleep(0.3)  # let the last events arrive before the subscriber goes
        sup.stop_all()
        executor.shutdown()
        # The spin thread must be out of rclpy's wait before the node and context go, or the process can
        # abort at exit ("terminate called without an active exception", SIGABRT).
        spinner.join(5.0)
        node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not interrupted:
        print(f"[up] done: {len(printer.ended)} episode(s) ended, {printer.events} events received, "
              f"{printer.gaps} lost (event_seq gaps); rollout exit code {rc}", flush=True)
    return rc


# --------------------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="bring up the arm driver and rollout node and run episodes (no ros2 launch)")
    up.add_argument("--config-file", default="", help="ROS parameters file (default: the package's rollout.yaml)")
    up.add_argument("--namespace", default="strands")
    up.add_argument("--policy", default="mock", help="policy provider: mock, replay, scripted")
    up.add_argument("--control-frequency", type=float, default=50.0)
    up.add_argument("--duration", type=float, default=5.0, help="episode budget in seconds")
    up.add_argument("--episodes", type=int, default=1)
    up.add_argument("--every-step", action="store_true", help="print every step, not one line per second")
    up.set_defaults(func=cmd_up)

    echo = sub.add_parser("echo", help="print a running rollout node's observer stream")
    echo.add_argument("--namespace", default="strands")
    echo.add_argument("--steps", action="store_true", help="print every step")
    echo.set_defaults(func=cmd_echo)

    demo = sub.add_parser("demo", help="the in-process observer lane, no ROS")
    demo.add_argument("--policy", default="mock")
    demo.add_argument("--control-frequency", type=float, default=50.0)
    demo.add_argument("--duration", type=float, default=2.0)
    demo.add_argument("--episodes", type=int, default=1)
    demo.add_argument("--every-step", action="store_true")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
