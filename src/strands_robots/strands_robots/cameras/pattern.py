"""The built-in ``pattern`` camera adapter: a generated test pattern, no OpenGL and no MJCF needed.

Each frame is eight colour bars with an inverted square that moves one step to the right per frame (so
consecutive frames differ) and a grey band whose brightness follows the sum of the last posed joint positions.
Its intrinsics are those of a 60 degree vertical field of view at the configured size. For bring-up of the
topics, the observation path and the recordings without a renderer, and for testing the adapter parameter.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from strands_robots.cameras.config import CameraSet
from strands_robots.cameras.intrinsics import Intrinsics, from_fovy

PATTERN_FOVY_DEG = 60.0
_BARS = np.array([[255, 255, 255], [255, 255, 0], [0, 255, 255], [0, 255, 0], [255, 0, 255], [255, 0, 0],
                  [0, 0, 255], [0, 0, 0]], dtype=np.uint8)


def cameras(config: CameraSet, model_path: "str | None" = None) -> "PatternCameras":
    """Build the ``pattern`` camera source (entry point of ``strands_robots.cameras``); ``model_path`` unused."""
    del model_path
    return PatternCameras(config)


class PatternCameras:
    """Test-pattern frames for every configured camera (implements ``CameraSource``)."""

    def __init__(self, config: CameraSet) -> None:
        self._config = config
        self._frame = {c.name: 0 for c in config.cameras}
        self._joint_sum = 0.0
        self._base = {}
        for c in config.cameras:
            cols = (np.arange(c.width) * len(_BARS)) // c.width
            self._base[c.name] = np.repeat(_BARS[cols][np.newaxis, :, :], c.height, axis=0)

    def names(self) -> tuple[str, ...]:
        return self._config.names

    def intrinsics(self, name: str) -> Intrinsics:
        c = self._config.camera(name)
        return from_fovy(PATTERN_FOVY_DEG, c.width, c.height)

    def pose(self, positions: Mapping[str, float]) -> None:
        self._joint_sum = float(sum(float(v) for v in positions.values()))

    def set_scene(self, task_params: "Optional[Mapping[str, Any]]", seed: "Optional[int]") -> None:
        del task_params, seed  # a pattern has no scene

    def render(self, name: str) -> np.ndarray:
        img = self._base[name].copy()
        h, w = img.shape[:2]
        n = self._frame[name]
        self._frame[name] = n + 1
        side = max(2, min(h, w) // 8)
        x = (n * max(1, side // 2)) % max(1, w - side)
        square = img[h // 2 - side // 2: h // 2 - side // 2 + side, x: x + side]
        square[...] = 255 - square  # inverted, so it shows on every bar
        band = int(128 + 100 * np.tanh(self._joint_sum / 4.0))
        img[-max(1, h // 10):, :] = band
        return img

    def close(self) -> None:
        pass
