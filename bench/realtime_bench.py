#!/usr/bin/env python3
"""The station's 50 Hz loop with both cameras beside a busy test suite: normal scheduler vs SCHED_FIFO, one run.

Per round, once per scheduler (interleaved, so both see the same machine): the arm driver, the camera node
(``scene`` and ``wrist``, 224x224 at 15 fps, MuJoCo offscreen with ``MUJOCO_GL=egl``) and the rollout node
(``cameras:=scene,wrist``, mock policy), each its own process and session as ``up`` and launch start them, run
one ``RunEpisode`` of ``--seconds`` at 50 Hz. ``other`` sets ``STRANDS_ROBOTS_RT_PRIORITY=off`` and
``STRANDS_ROBOTS_CAMERA_RT_PRIORITY=off``; ``fifo`` leaves both unset, i.e. the nodes' default where permitted:
SCHED_FIFO 50 for the driver and the rollout node, 10 for the camera node. ``loop-fifo`` (not in the default
``--schedulers``) keeps the camera node time-shared.

The load is the bench's own, started before the first run and ended after the last, each part in a session of
its own (as another engineer's terminal or a CI job would be): ``--load tests:N`` runs the project's fast unit
tests (``STRANDS_ROBOTS_TEST_FAST=1 pytest``, CPU-bound Python) over and over in N sessions; ``hogs:N`` adds N
busy loops; ``none`` runs without. Whatever else the machine runs adds to it: the load average is printed.

Per run:

- ``held``: 1 - missed / (applied + missed), from the episode's ``RunPolicyEnded`` (the loop's own count: a
  deadline is missed when the loop comes back to it more than 50 us late and it is dropped);
- ``sent dev p50/p99/max``: |interval - 20 ms| between the ``sent`` stamps of consecutive steps' commands (the
  rollout's control loop stamps them as it publishes; the bench's own scheduling does not enter, and a command it
  did not hear leaves out its two intervals instead of making a gap);
- ``js p99``: the same for ``joint_states`` header stamps (the driver's physics thread publishes one per period);
- ``c2v p99``: the rollout's command-to-verdict p99 (its stream summary line);
- ``fps``: ``camera_info`` messages per second per camera (one per frame);
- ``sched``: the nodes' scheduling lines, and the threads of each node on SCHED_FIFO / all, read from ``/proc``
  mid-episode;
- ``CPU s/s``: each process's CPU seconds per second of the episode.

Then per scheduler over all rounds: steps, missed, held, and the pooled p99s.

    source scripts/env.sh --no-install
    export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH ROS_DOMAIN_ID=<yours> ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
    python bench/realtime_bench.py --seconds 60 --rounds 3 --load tests:3     # about 10 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "strands_robots"))

RATE_HZ = 50.0
SCHEDULERS = ("other", "fifo", "loop-fifo")
SCHED_LINE = re.compile(r"real-time scheduling: (.*)$", re.M)
C2V = re.compile(r"command-to-verdict p50 ([\d.]+) ms p99 ([\d.]+) ms")


def percentile(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100.0 * (len(ordered) - 1)))))]


def joint_deviations_ms(joints: List[tuple], period_s: float) -> List[float]:
    """|interval - period| between the stamps of joint states one period of robot time apart.

    A message this process missed leaves its intervals out instead of making a gap.
    """
    return [abs((b[1] - a[1]) - period_s * 1e9) / 1e6 for a, b in zip(joints, joints[1:])
            if abs((b[0] - a[0]) - period_s) < period_s / 2]


def step_deviations_ms(sent: List[tuple], period_s: float) -> List[float]:
    """|interval - period| between commands of consecutive steps (a command this process missed hides no gap)."""
    by_step = dict(sent)
    return [abs((by_step[i + 1] - by_step[i]) - period_s * 1e9) / 1e6 for i in sorted(by_step) if i + 1 in by_step]


def time_shared() -> None:
    """preexec_fn: every process the bench starts begins on the normal scheduler whatever the bench's."""
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


# -- the load ----------------------------------------------------------------------------------------------------
class Load:
    """The bench's own background load, each part in its own session; ended by process group."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.procs: List[subprocess.Popen] = []

    def start(self) -> "Load":
        env = dict(os.environ, STRANDS_ROBOTS_TEST_FAST="1", PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT / "src" / "strands_robots"), os.environ.get("PYTHONPATH", "")])))
        suite = (f"while :; do {sys.executable} -m pytest -p no:cacheprovider -q -x "
                 f"{ROOT / 'src' / 'strands_robots' / 'test'} >/dev/null 2>&1; done")
        for part in filter(None, (p.strip() for p in self.spec.split(","))):
            kind, _, count = part.partition(":")
            if kind == "none":
                continue
            argv = {"tests": ["bash", "-c", suite], "hogs": [sys.executable, "-c", "while True: pass"]}.get(kind)
            if argv is None:
                raise SystemExit(f"--load: unknown part {part!r} (tests:N, hogs:N or none)")
            for _ in range(int(count or 1)):
                self.procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL, start_new_session=True,
                                                   preexec_fn=time_shared))
        return self

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            proc.wait(10)


# -- one run -----------------------------------------------------------------------------------------------------
def cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fifo_threads(pid: int) -> str:
    """'<FIFO threads>/<threads>' of ``pid`` as the system has them now."""
    fifo = total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return "gone"
    for tid in tids:
        try:
            policy = os.sched_getscheduler(int(tid))
        except OSError:
            continue
        total += 1
        fifo += policy == os.SCHED_FIFO
    return f"{fifo}/{total}"


class Listener:
    """This process's view: commands' sent stamps, joint_states stamps, camera_info counts, in one namespace."""

    def __init__(self, node: Any, ns: str) -> None:
        from sensor_msgs.msg import CameraInfo, JointState
        from strands_robots_msgs.msg import ActionCommand

        from strands_robots.conversions.joint_state import joint_state_robot_time_s
        from strands_robots.ros.qos import COMMAND_QOS, STATE_QOS
        from strands_robots.ros.qos import IMAGE_QOS

        self._robot_time_s = joint_state_robot_time_s
        self.lock = threading.Lock()
        self.sent: List[tuple] = []
        self.joint_stamps: List[int] = []
        self.frames = {"scene": 0, "wrist": 0}
        self.recording = False
        self.subs = [
            node.create_subscription(ActionCommand, f"{ns}/action_commands", self._on_command, COMMAND_QOS),
            node.create_subscription(JointState, f"{ns}/joint_states", self._on_joints, STATE_QOS),
        ]
        for cam in self.frames:
            self.subs.append(node.create_subscription(CameraInfo, f"{ns}/{cam}/camera_info",
                                                      lambda _m, c=cam: self._on_frame(c), IMAGE_QOS))
        self.node = node

    def _on_command(self, msg: Any) -> None:
        with self.lock:
            self.sent.append((int(msg.step_index), msg.sent.sec * 1_000_000_000 + msg.sent.nanosec))

    def _on_joints(self, msg: Any) -> None:
        if self.recording:
            robot_s = self._robot_time_s(msg)
            with self.lock:
                self.joint_stamps.append((robot_s, msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec))

    def _on_frame(self, cam: str) -> None:
        with self.lock:
            self.frames[cam] += 1

    def close(self) -> None:
        for sub in self.subs:
            self.node.destroy_subscription(sub)


def start_node(module: str, ns: str, params: List[str], env: Dict[str, str], log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={ns}"]
    for p in params:
        argv += ["-p", p]
    handle = open(log, "w", encoding="utf-8")
    try:
        return subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=time_shared)
    finally:
        handle.close()


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        except ProcessLookupError:
            pass


def wait_future(future: Any, timeout_s: float, what: str) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        raise RuntimeError(f"{what}: no answer within {timeout_s:g} s")
    return future.result()


def run_once(node: Any, scheduler: str, seconds: float, logs: Path) -> Dict[str, Any]:
    from rclpy.action import ActionClient
    from strands_robots_msgs.action import RunEpisode

    ns = f"/rtbench_{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, MUJOCO_GL="egl", PYTHONUNBUFFERED="1")
    for variable in ("STRANDS_ROBOTS_RT_PRIORITY", "STRANDS_ROBOTS_CAMERA_RT_PRIORITY", "STRANDS_ROBOTS_EXECUTOR"):
        env.pop(variable, None)
    if scheduler == "other":
        env["STRANDS_ROBOTS_RT_PRIORITY"] = env["STRANDS_ROBOTS_CAMERA_RT_PRIORITY"] = "off"
    elif scheduler == "loop-fifo":
        env["STRANDS_ROBOTS_CAMERA_RT_PRIORITY"] = "off"
    listener = Listener(node, ns)
    names = ("driver", "camera", "rollout")
    tag = f"{scheduler}-{ns.strip('/')}"
    procs = {
        "driver": start_node("strands_robots.nodes.arm_driver.node", ns,
                             ["autostart:=true", f"control_rate_hz:={RATE_HZ:.1f}"], env, logs / f"{tag}-driver.log"),
        "camera": start_node("strands_robots.nodes.camera.node", ns, [], env, logs / f"{tag}-camera.log"),
        "rollout": start_node("strands_robots.nodes.rollout.node", ns,
                              ["start_pose_before_episode:=false", f"control_frequency:={RATE_HZ:.1f}",
                               "driver_timeout_s:=60.0", "cameras:=scene,wrist", "camera_scene_node:=camera"],
                              env, logs / f"{tag}-rollout.log"),
    }
    action = ActionClient(node, RunEpisode, f"{ns}/run_episode")
    row: Dict[str, Any] = {"scheduler": scheduler, "load_before": os.getloadavg()[0]}
    try:
        deadline = time.monotonic() + 180.0
        while not action.wait_for_server(timeout_sec=1.0):
            gone = [n for n in names if procs[n].poll() is not None]
            if gone or time.monotonic() > deadline:
                tail = (logs / f"{tag}-{(gone or ['rollout'])[0]}.log").read_text(errors="replace")[-300:]
                raise RuntimeError(f"run_episode not found ({', '.join(gone) or 'timeout'}): {tail!r}")
        deadline = time.monotonic() + 180.0
        while min(listener.frames.values()) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        with listener.lock:
            frames0 = dict(listener.frames)
        cpu0 = {n: cpu_s(procs[n].pid) for n in names}
        wall0 = time.monotonic()
        listener.recording = True
        handle = wait_future(action.send_goal_async(RunEpisode.Goal(control_frequency=RATE_HZ, duration_s=seconds,
                                                                    seed=1)), 60.0, "RunEpisode goal")
        result_future = handle.get_result_async()
        time.sleep(min(5.0, seconds / 2))
        row["threads_fifo"] = {n: fifo_threads(procs[n].pid) for n in names}
        ended = wait_future(result_future, seconds * 2 + 120.0, "RunEpisode result").result.ended
        wall = time.monotonic() - wall0
        listener.recording = False
        with listener.lock:
            frames1 = dict(listener.frames)
            sent = sorted(listener.sent)
            joints = list(listener.joint_stamps)
        row["cpu"] = {n: (cpu_s(procs[n].pid) - cpu0[n]) / wall for n in names}
        row["fps"] = {c: (frames1[c] - frames0[c]) / wall for c in frames1}
        row["outcome"] = f"{ended.outcome} {ended.error_message[:60]}".strip()
        row["steps"], row["missed"] = int(ended.applied_actions), int(ended.missed_deadlines)
        row["sent_dev_ms"] = step_deviations_ms(sent, 1.0 / RATE_HZ)
        row["sent_heard"] = len(sent)
        row["js_dev_ms"] = joint_deviations_ms(joints, 1.0 / RATE_HZ)
        row["load_after"] = os.getloadavg()[0]
    finally:
        action.destroy()
        for n in reversed(names):
            end(procs[n])
        listener.close()
    for n in names:
        text = (logs / f"{tag}-{n}.log").read_text(encoding="utf-8", errors="replace")
        row.setdefault("sched_lines", {})[n] = SCHED_LINE.findall(text)
        m = C2V.findall(text)
        if m and n == "rollout":
            row["c2v_p99_ms"] = float(m[-1][1])
    return row


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        from importlib.metadata import version

        rclpy_version = version("rclpy")
    except Exception:
        rclpy_version = "?"
    return (f"{platform.node()} {cpu} x{os.cpu_count()}, Linux {platform.release()}, Python "
            f"{platform.python_version()}, rclpy {rclpy_version}, RMW {os.environ.get('RMW_IMPLEMENTATION', '?')}")


def short_line(line: str) -> str:
    """'FIFO 50' or 'off' from a node's scheduling line."""
    m = re.match(r"SCHED_FIFO (\d+)", line)
    return f"FIFO {m.group(1)}" if m else "off"


def fmt_row(row: Dict[str, Any]) -> str:
    if "steps" not in row:
        return f"| {row['scheduler']} | failed: {row.get('error', '?')} |"
    deadlines = row["steps"] + row["missed"]
    held = 100.0 * (1 - row["missed"] / max(1, deadlines))
    s, j = row["sent_dev_ms"], row["js_dev_ms"]
    sched = "; ".join(f"{n} {'/'.join(short_line(x) for x in row['sched_lines'].get(n, [])) or '-'} "
                      f"{row['threads_fifo'][n]}" for n in ("driver", "rollout", "camera"))
    return (f"| {row['scheduler']} | {row['outcome']} | {row['steps']} | {row['missed']} | {held:.2f} % | "
            f"{percentile(s, 50):.3f} / {percentile(s, 99):.3f} / {max(s, default=float('nan')):.1f} | "
            f"{percentile(j, 99):.3f} | {row.get('c2v_p99_ms', float('nan')):.2f} | "
            f"{row['fps']['scene']:.1f} / {row['fps']['wrist']:.1f} | "
            f"{row['cpu']['driver']:.2f} / {row['cpu']['rollout']:.2f} / {row['cpu']['camera']:.2f} | "
            f"{row['load_before']:.1f}→{row['load_after']:.1f} | {sched} |")


HEADER = ("| scheduler | outcome | steps | missed | held | sent dev p50 / p99 / max ms | js dev p99 ms | c2v p99 ms "
          "| fps scene / wrist | CPU s/s driver / rollout / camera | load | scheduling line, FIFO threads |")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="episode length (default 60: 3000 steps)")
    p.add_argument("--rounds", type=int, default=3, help="runs per scheduler, interleaved (default 3)")
    p.add_argument("--schedulers", default="other,fifo", help="of other, fifo, loop-fifo (default other,fifo)")
    p.add_argument("--load", default="tests:3", help="tests:N, hogs:N (comma-separated) or none (default tests:3)")
    p.add_argument("--warm-up-s", type=float, default=20.0, help="load running before the first run (default 20)")
    args = p.parse_args(argv)
    schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    for s in schedulers:
        if s not in SCHEDULERS:
            raise SystemExit(f"--schedulers: {s!r} is not one of {', '.join(SCHEDULERS)}")
    time_shared()  # this process and its listener stay on the normal scheduler whatever started it

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    print(f"machine: {machine()}")
    print(f"start: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, load: {args.load}, {args.rounds} round(s) of "
          f"{args.seconds:g} s at {RATE_HZ:g} Hz", flush=True)
    rclpy.init()
    node = rclpy.create_node(f"realtime_bench_{uuid.uuid4().hex[:6]}")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, name="bench-spin", daemon=True).start()
    load = Load(args.load).start()
    rows: List[Dict[str, Any]] = []
    logs = Path(tempfile.mkdtemp(prefix="realtime_bench_"))
    try:
        time.sleep(args.warm_up_s)
        print(HEADER)
        print("|---" * (HEADER.count("|") - 1) + "|", flush=True)
        for _ in range(args.rounds):
            for scheduler in schedulers:
                try:
                    row = run_once(node, scheduler, args.seconds, logs)
                except RuntimeError as exc:
                    row = {"scheduler": scheduler, "error": str(exc)}
                rows.append(row)
                print(fmt_row(row), flush=True)
    finally:
        load.stop()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"end: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; node logs in {logs}")
    print("| scheduler | runs | steps | missed | held | sent dev p99 (pooled) ms | js dev p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for scheduler in schedulers:
        done = [r for r in rows if r["scheduler"] == scheduler and "steps" in r]
        steps, missed = sum(r["steps"] for r in done), sum(r["missed"] for r in done)
        sent = [d for r in done for d in r["sent_dev_ms"]]
        joints = [d for r in done for d in r["js_dev_ms"]]
        held = 100.0 * (1 - missed / max(1, steps + missed))
        print(f"| {scheduler} | {len(done)} | {steps} | {missed} | {held:.3f} % | {percentile(sent, 99):.3f} | "
              f"{percentile(joints, 99):.3f} |")
    os.makedirs(ROOT / "bench" / "results", exist_ok=True)
    path = ROOT / "bench" / "results" / time.strftime("realtime_bench-%Y%m%dT%H%M%SZ.json", time.gmtime())
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"machine": machine(), "args": vars(args), "rows": rows}, handle, indent=1)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
