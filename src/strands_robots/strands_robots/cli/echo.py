"""``strands-robots echo``: a running rollout node's observer stream as lines, gaps or per-run summaries."""

from __future__ import annotations

import argparse
import signal
import threading

from strands_robots.ros.tools import ros_env_check, subscribe_events
from strands_robots.cli.stream import StreamPrinter


def cmd_echo(args: argparse.Namespace) -> int:
    """Print until Ctrl-C (or until ``--runs`` runs have ended); 0, or 1 when ``--gaps`` found events lost."""
    ros_env_check("echo")
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.ros.process import StopSignals, init_without_signal_handlers, spin_in_background

    mode = "gaps" if args.gaps else "summary" if args.summary else "lines"
    printer = StreamPrinter(every_step=args.steps, mode=mode)
    done = threading.Event()

    def on_event(event) -> None:
        printer(event)
        if args.runs and len(printer.ended) >= args.runs:
            done.set()

    with StopSignals() as signals:
        init_without_signal_handlers(["strands-robots"])
        node = rclpy.create_node("strands_robots_echo")
        subscribe_events(node, args.namespace, on_event)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin = spin_in_background(executor, "echo-executor")
        try:
            while not signals.event.wait(0.1) and not done.is_set() and spin.is_alive():
                pass
        finally:
            spin.stop(5.0)
            node.destroy_node()
            rclpy.try_shutdown()
    printer.finish()
    if signals.signum and signals.signum != signal.SIGINT:
        return 128 + signals.signum
    return 1 if args.gaps and printer.gaps else 0
