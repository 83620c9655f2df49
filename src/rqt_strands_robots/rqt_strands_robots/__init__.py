"""rqt_strands_robots: the strands_robots station monitor, as an rqt plugin and as a window of its own.

- :mod:`~rqt_strands_robots.monitor_model` — what is shown, folded from the streams (no ROS, no Qt);
- :mod:`~rqt_strands_robots.monitor_widget` — the widget: ROS subscriptions and service clients on a node it is
  given, the model, and the views (Qt through ``python_qt_binding`` when rqt is installed, else PyQt5);
- :mod:`~rqt_strands_robots.monitor_plugin` — the thin rqt ``Plugin`` that hands its node to the widget.
"""
