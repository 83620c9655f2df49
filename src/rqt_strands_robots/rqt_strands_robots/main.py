"""``ros2 run rqt_strands_robots rqt_strands_robots``: the monitor plugin alone in rqt."""

from __future__ import annotations

import sys


def main() -> int:
    from rqt_gui.main import Main  # type: ignore[import-not-found]

    return Main().main(sys.argv, standalone="rqt_strands_robots.monitor_plugin.MonitorPlugin")


if __name__ == "__main__":
    sys.exit(main())
