"""SIGTERM closes rqt as its Ctrl-C does (the plugin installs it: rqt alone ignores SIGTERM)."""

from __future__ import annotations

import signal
import threading

from rqt_strands_robots.qt import QtWidgets

__all__ = ["end_rqt_on_sigterm"]


def end_rqt_on_sigterm() -> bool:
    """Make SIGTERM close rqt as its Ctrl-C does; True when installed (only the main thread can).

    rqt handles SIGINT only, and the handler ``rclpy.init`` installs for SIGTERM shuts its context down and
    nothing else: a ``kill`` (a launcher's, systemd's) left rqt running. Closing every window runs rqt's own
    shutdown (settings saved, plugins shut down) and ends its event loop; rqt's periodic timer runs Python, so
    the handler runs within half a second even while Qt waits.
    """
    if threading.current_thread() is not threading.main_thread():
        return False

    def close(_signum: int, _frame: object) -> None:
        app = QtWidgets.QApplication.instance()
        if app is not None:
            app.closeAllWindows()
            app.quit()

    signal.signal(signal.SIGTERM, close)
    return True
