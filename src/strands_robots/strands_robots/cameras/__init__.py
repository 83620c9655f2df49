"""Cameras: configuration, intrinsics, rendering, encoding, frame age and the camera adapter API (no rclpy).

- :mod:`~strands_robots.cameras.config` — the camera set (``config/cameras.yaml``): name, size, fps, the MJCF
  camera, the stale bound; one check of every value;
- :mod:`~strands_robots.cameras.intrinsics` — an MJCF camera's ``fovy`` and image size as CameraInfo numbers;
- :mod:`~strands_robots.cameras.gl` — which offscreen OpenGL works here (EGL, else OSMesa), said in one line;
- :mod:`~strands_robots.cameras.render` — ``mujoco.Renderer`` per camera over a model of one's own;
- :mod:`~strands_robots.cameras.jpeg` — JPEG encoding and decoding (Pillow);
- :mod:`~strands_robots.cameras.frames` — the latest frame per camera, its age and the stale rule;
- :mod:`~strands_robots.cameras.scene` — where the coloured object stands, from the task and the seed;
- :mod:`~strands_robots.cameras.adapter` — the camera adapter API and the entry-point group
  ``strands_robots.cameras`` (built in: ``mujoco`` and ``pattern``);
- :mod:`~strands_robots.cameras.backend` — in process: a rollout backend whose observations hold the images;
- :mod:`~strands_robots.cameras.request` — which cameras a task's policy gets through the relay, at what size,
  JPEG or PNG (the station's side of ``Value.image``);
- :mod:`~strands_robots.cameras.reach` — the vision task's measure: the tool points' distance to the object.
"""
