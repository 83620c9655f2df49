"""``strands-robots monitor``: the rqt_strands_robots monitor widget in a window of its own (no rqt needed).

Qt comes from ``python_qt_binding`` when rqt is installed, else from PyQt5 (``pip install PyQt5``). The node is
spun on a background thread; the widget only reads what its subscriptions queued, on the GUI thread. Its operator
buttons are the widget's: take over, resume, discard, submit a score sheet, and "Clear safety stop" (the station's
``clear_safety_stop`` under ``--operator``: the station never clears a stop by itself).

``--screenshot PNG --duration S`` runs headless-friendly (``QT_QPA_PLATFORM=offscreen``): watch for S seconds,
save the window to PNG and exit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["import_widget", "build_parser", "main"]



def _rqt_source() -> "Path | None":
    """Return the rqt package's source tree, for a checkout where colcon has not installed it (None: no checkout)."""
    from strands_robots.package_files import checkout_dir

    checkout = checkout_dir()
    return None if checkout is None else checkout.parent / "rqt_strands_robots"


def import_widget() -> Any:
    """``rqt_strands_robots.monitor_widget`` (installed, else from this checkout's source tree).

    :raises ImportError: neither is importable, or no Qt binding is installed (the message says which).
    """
    try:
        import rqt_strands_robots.monitor_widget as widget
    except ModuleNotFoundError as exc:
        if exc.name not in ("rqt_strands_robots", "rqt_strands_robots.monitor_widget"):
            raise ImportError(f"the monitor needs Qt: {exc} (pip install PyQt5, or install rqt)") from exc
        source = _rqt_source()
        if source is None or not (source / "rqt_strands_robots" / "monitor_widget.py").is_file():
            raise ImportError("rqt_strands_robots is not installed (colcon build it)") from exc
        sys.path.insert(0, str(source))
        try:
            import rqt_strands_robots.monitor_widget as widget
        except ModuleNotFoundError as inner:
            raise ImportError(f"the monitor needs Qt: {inner} (pip install PyQt5, or install rqt)") from inner
    return widget


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots monitor",
                                     description="the station monitor in a window of its own")
    parser.add_argument("--namespace", default="strands", help="the station's namespace (default %(default)s)")
    parser.add_argument("--operator", default="operator",
                        help="the name operator actions are made under (default %(default)s)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="close after this many seconds (default 0: stay open)")
    parser.add_argument("--screenshot", default="",
                        help="save the window to this PNG file when closing (default: none)")
    parser.add_argument("--size", default="1280x720", help="window size WIDTHxHEIGHT in pixels (default %(default)s)")
    return parser


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run the window until it is closed, Ctrl-C, or ``--duration``; 2 when Qt or ROS is missing."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from strands_robots.ros.tools import ros_env_check

    ros_env_check("monitor")
    try:
        widget_module = import_widget()
    except ImportError as exc:
        print(f"strands-robots monitor: {exc}", file=sys.stderr, flush=True)
        return 2
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.ros.process import StopSignals, init_without_signal_handlers, spin_in_background

    QtCore, QtWidgets = widget_module.QtCore, widget_module.QtWidgets
    width, _, height = args.size.partition("x")
    with StopSignals() as signals:
        init_without_signal_handlers(["strands-robots"])
        node = rclpy.create_node("strands_robots_monitor")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin = spin_in_background(executor, "monitor-executor")
        app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(["strands-robots monitor"])
        widget = widget_module.MonitorWidget(node, namespace=args.namespace, operator_name=args.operator)
        widget.resize(int(width or 1280), int(height or 720))
        widget.show()
        # Ctrl-C / SIGTERM and --duration reach the Qt loop through a timer (signal handlers only set an event).
        watch = QtCore.QTimer()
        watch.timeout.connect(lambda: app.quit() if signals.event.is_set() or not spin.is_alive() else None)
        watch.start(100)
        if args.duration > 0:
            QtCore.QTimer.singleShot(int(args.duration * 1000), app.quit)
        try:
            app.exec_() if hasattr(app, "exec_") else app.exec()
            widget.drain()
            if args.screenshot:
                Path(args.screenshot).parent.mkdir(parents=True, exist_ok=True)
                if not widget.grab().save(args.screenshot):
                    print(f"strands-robots monitor: cannot write {args.screenshot}", file=sys.stderr)
        finally:
            watch.stop()
            # The context first: the spin ends as a shutdown, never inside a callback whose handles the executor
            # or the widget is destroying (an executor.shutdown() under live camera traffic raised InvalidHandle).
            rclpy.try_shutdown()
            spin.join(5.0)
            widget.shutdown()
            executor.shutdown()
            node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
