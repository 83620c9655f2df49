"""The rqt plugin: a thin ``Plugin`` that gives rqt's node to the :class:`MonitorWidget` and keeps its settings."""

from __future__ import annotations

from qt_gui.plugin import Plugin  # type: ignore[import-not-found]

from rqt_strands_robots.monitor_widget import MonitorWidget
from rqt_strands_robots.sigterm import end_rqt_on_sigterm


class MonitorPlugin(Plugin):
    """rqt → Plugins → Robot Tools → Strands Robots Monitor."""

    def __init__(self, context: object) -> None:
        super().__init__(context)
        self.setObjectName("StrandsRobotsMonitor")
        end_rqt_on_sigterm()  # after rclpy.init (rqt's node is up by now), whose SIGTERM handler it replaces
        self._widget = MonitorWidget(context.node)
        if context.serial_number() > 1:
            self._widget.setWindowTitle(f"{self._widget.windowTitle()} ({context.serial_number()})")
        context.add_widget(self._widget)

    def shutdown_plugin(self) -> None:
        self._widget.shutdown()

    def save_settings(self, plugin_settings: object, instance_settings: object) -> None:
        instance_settings.set_value("namespace", self._widget.namespace_edit.text())
        instance_settings.set_value("operator", self._widget.operator_edit.text())

    def restore_settings(self, plugin_settings: object, instance_settings: object) -> None:
        namespace = instance_settings.value("namespace")
        if namespace:
            self._widget.set_namespace(str(namespace))
        operator = instance_settings.value("operator")
        if operator:
            self._widget.operator_edit.setText(str(operator))
