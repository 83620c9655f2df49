"""Qt for the monitor: ``python_qt_binding`` (what rqt uses) when it is installed, else PyQt5 from PyPI."""

from __future__ import annotations

try:
    from python_qt_binding import QtCore, QtGui, QtWidgets  # type: ignore[import-not-found]

    BINDING = "python_qt_binding"
except ImportError:
    from PyQt5 import QtCore, QtGui, QtWidgets  # type: ignore[import-not-found,no-redef]

    BINDING = "PyQt5"

__all__ = ["BINDING", "QtCore", "QtGui", "QtWidgets"]
