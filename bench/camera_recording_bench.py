"""What the cameras cost an episode recording: the control loop's write_step beside the cameras' write_raw.

Not pass/fail. One EpisodeRecorder per run, 50 Hz steps (14 actuator keys) for ``--seconds`` of episode written
back to back, with and without two cameras' messages (224x224 JPEGs of MuJoCo-like size at 15 fps each, real
``CompressedImage`` / ``CameraInfo`` CDR from rclpy's serializer) handed over from a second thread, as the rollout
node's camera tap does. Reported per run: ``write_step`` p50 / p99 / max (ms: what the control-loop thread pays,
a chunk's compression included when its write completes one), ``write_raw`` p50 / p99 (ms), the file's size and
MB per episode minute.

Usage::

    source scripts/env.sh --no-install
    export PYTHONPATH=src/strands_robots
    python bench/camera_recording_bench.py --seconds 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots"))

KEYS = tuple(f"{arm}.joint_{i}" for arm in ("left", "right") for i in range(1, 8))
RATE_HZ = 50.0
FPS = 15.0


def _frames(n: int) -> list:
    """``n`` JPEGs of the scene-like pattern (224x224), each one different, as CompressedImage CDR."""
    import numpy as np
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import CompressedImage

    from strands_robots.cameras import jpeg

    out = []
    rng = np.random.default_rng(1)
    base = (rng.random((224, 224, 3)) * 40 + 100).astype(np.uint8)
    for i in range(n):
        image = base.copy()
        image[100:124, (i * 3) % 200:(i * 3) % 200 + 24] = (200, 30, 30)
        msg = CompressedImage(format="rgb8; jpeg compressed bgr8", data=jpeg.encode(image, 90))
        out.append(serialize_message(msg))
    return out


def _info() -> bytes:
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import CameraInfo

    return serialize_message(CameraInfo(width=224, height=224, distortion_model="plumb_bob"))


def _pct(values: list, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def run(seconds: float, cameras: bool, frames: list, info: bytes, out_dir: Path) -> dict:
    from strands_robots.rollout.recording import EpisodeRecorder

    path = out_dir / f"episode_{'cams' if cameras else 'joints'}.mcap"
    rec = EpisodeRecorder.open(path, control_frequency=RATE_HZ, fps=RATE_HZ, actuator_keys=KEYS, topic_prefix="/s")
    steps = int(seconds * RATE_HZ)
    step_ms: list = []
    raw_ms: list = []
    stop = threading.Event()

    def camera_thread() -> None:
        n = 0
        period = 1.0 / FPS
        start = time.monotonic()
        while not stop.is_set():
            for cam in ("scene", "wrist"):
                t0 = time.perf_counter()
                rec.write_raw(f"/s/{cam}/image_raw/compressed", "sensor_msgs/msg/CompressedImage",
                              frames[n % len(frames)], time.time_ns())
                rec.write_raw(f"/s/{cam}/camera_info", "sensor_msgs/msg/CameraInfo", info, time.time_ns())
                raw_ms.append((time.perf_counter() - t0) * 1e3 / 2)
            n += 1
            stop.wait(max(0.0, start + n * period - time.monotonic()))

    thread = threading.Thread(target=camera_thread, daemon=True) if cameras else None
    if thread:
        thread.start()
    obs = {f"{k}.{q}": 0.1 for k in KEYS for q in ("pos", "vel", "effort")}
    action = {k: 0.2 for k in KEYS}
    start = time.monotonic()
    for i in range(steps):  # paced at 50 Hz, as the loop is
        t0 = time.perf_counter()
        rec.write_step(i, time.time_ns(), obs, action, None)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        time.sleep(max(0.0, start + (i + 1) / RATE_HZ - time.monotonic()))
    stop.set()
    if thread:
        thread.join(5.0)
    rec.close()
    size = path.stat().st_size
    return {"cameras": cameras, "steps": steps, "step_p50": statistics.median(step_ms), "step_p99": _pct(step_ms, 0.99),
            "step_max": max(step_ms), "raw_p50": statistics.median(raw_ms) if raw_ms else float("nan"),
            "raw_p99": _pct(raw_ms, 0.99), "raw_msgs": sum(rec.raw_counts.values()), "mb": size / 1e6,
            "mb_per_min": size / 1e6 * 60.0 / seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="episode length per run (s)")
    args = parser.parse_args()
    frames = _frames(64)
    info = _info()
    print(f"JPEG frame CDR: {statistics.median(len(f) for f in frames) / 1e3:.1f} kB (median)")
    print("| run | write_step p50 / p99 / max (ms) | write_raw p50 / p99 (ms) | raw messages | file | MB per minute |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for cameras in (False, True):
            r = run(args.seconds, cameras, frames, info, Path(tmp))
            print(f"| {'joints + 2 cameras' if cameras else 'joints only'} | {r['step_p50']:.3f} / "
                  f"{r['step_p99']:.3f} / {r['step_max']:.2f} | {r['raw_p50']:.3f} / {r['raw_p99']:.3f} | "
                  f"{r['raw_msgs']} | {r['mb']:.2f} MB | {r['mb_per_min']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
