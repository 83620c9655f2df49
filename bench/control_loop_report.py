"""The control-loop benchmark's report: the machine, the table, the ratios and the DESIGN.md §8 targets.

:func:`machine_info` / :func:`machine_line` say what the figures were measured on; :func:`table` prints one row
per run (bench/README.md, Columns); :func:`ratios` compares the modes and with / without observer;
:func:`targets` marks each DESIGN.md §8 target as met or MISSED.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any, Optional



# DESIGN.md §8.
TARGET_ROS_RATE = 200.0
TARGET_ROS_RATES = (200.0, 500.0)
TARGET_ROS_P99_MS = 1.0
TARGET_MISSED_PCT = 0.1
TARGET_INPROC_RATES = (500.0, 1000.0)
TARGET_INPROC_P99_MS = 0.5
TARGET_OBSERVER_US = 10.0
PEER = "peer (strands-robots 0.5.3, in-process): 200 Hz p99 ~2.2 ms; 474 steps/s asked 500 Hz; observer 25-40 us/step"


def machine_info() -> dict:
    info: dict = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        info["cpu"] = platform.processor() or "?"
    info["cores"] = os.cpu_count()
    try:
        info["cores_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["cores_usable"] = info["cores"]
    info["python"] = platform.python_version()
    info["kernel"] = platform.release()
    info["loadavg_at_start"] = os.getloadavg()
    try:
        from importlib import metadata

        version = ""
        for dist in ("ros-rclpy", "rclpy"):
            try:
                version = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
        info["rclpy"] = version or "?"
    except Exception:
        info["rclpy"] = "?"
    distro = os.environ.get("ROS_DISTRO", "")
    if not distro:
        major = info["rclpy"].split(".")[0]
        distro = {"3": "humble", "7": "jazzy", "9": "kilted"}.get(major, "?") + " (PyPI wheels)"
    info["ros_distro"] = distro
    try:
        from rclpy.utilities import get_rmw_implementation_identifier

        info["rmw"] = get_rmw_implementation_identifier()
    except Exception:
        info["rmw"] = os.environ.get("RMW_IMPLEMENTATION", "?")
    try:
        import mujoco

        info["mujoco"] = mujoco.__version__
    except Exception:
        info["mujoco"] = "?"
    info["ros_domain_id"] = os.environ.get("ROS_DOMAIN_ID", "")
    info["switch_interval_ms"] = sys.getswitchinterval() * 1e3
    return info


def machine_line(m: dict) -> str:
    return (f"machine: {m['cpu']}, {m['cores']} cores ({m['cores_usable']} usable), Python {m['python']}, "
            f"rclpy {m['rclpy']} ({m['ros_distro']}), RMW {m['rmw']}, MuJoCo {m['mujoco']}, "
            f"load {m['loadavg_at_start'][0]:.2f}, ROS_DOMAIN_ID={m['ros_domain_id']}")


def _f(value: Any, fmt: str = "{:.3f}") -> str:
    if value is None:
        return "-"
    try:
        if isinstance(value, float) and value != value:
            return "-"
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


COLUMNS = [
    ("mode", 7, lambda r: r["mode"]),
    ("obs", 4, lambda r: "with" if r["observer"] else "-"),
    ("Hz", 5, lambda r: _f(r["rate_hz"], "{:g}")),
    ("steps/s", 8, lambda r: _f(r.get("achieved_hz"), "{:.1f}")),
    ("dev p50", 8, lambda r: _f(r.get("interval_dev_ms", {}).get("p50"))),
    ("dev p99", 8, lambda r: _f(r.get("interval_dev_ms", {}).get("p99"))),
    ("dev max", 8, lambda r: _f(r.get("interval_dev_ms", {}).get("max"), "{:.2f}")),
    ("miss %", 7, lambda r: _f(r.get("missed_pct"), "{:.2f}")),
    ("rtt p50", 8, lambda r: _f(r.get("rtt_ms", {}).get("p50"))),
    ("rtt p99", 8, lambda r: _f(r.get("rtt_ms", {}).get("p99"))),
    ("c2v p50", 8, lambda r: _f(r.get("c2v_ms", {}).get("p50"))),
    ("c2v p99", 8, lambda r: _f(r.get("c2v_ms", {}).get("p99"))),
    ("events pub/recv/lost", 20, lambda r: _events_cell(r)),
    ("obs us/st", 9, lambda r: _f(r.get("observer_cost", {}).get("us_per_step"), "{:.1f}")),
    ("cpu%", 5, lambda r: _f(r.get("cpu", {}).get("bench_cpu_pct"), "{:.0f}")),
    ("drv%", 5, lambda r: _f(r.get("cpu", {}).get("driver_cpu_pct"), "{:.0f}")),
    ("cnt%", 5, lambda r: _f(r.get("cpu", {}).get("counter_cpu_pct"), "{:.0f}")),
    ("oth%", 5, lambda r: _f(r.get("cpu", {}).get("others_cpu_pct"), "{:.0f}")),
]


def _events_cell(r: dict) -> str:
    ev = r.get("events")
    if not ev:
        return "-"
    lost = ev.get("lost", ev.get("missing"))
    cell = f"{ev.get('published')}/{ev.get('received')}/{_f(lost, '{}')}"
    exit_reason = ev.get("counter_exit", "ended")
    return cell if exit_reason == "ended" else f"{cell} ({exit_reason})"


def table(rows: list) -> str:
    head = " ".join(name.rjust(w) for name, w, _ in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.get("failed"):
            lines.append(f"{r['mode']:>7} {'with' if r['observer'] else '-':>4} {r['rate_hz']:>5g}  FAILED: "
                         f"{r['failed']}")
            continue
        lines.append(" ".join(str(fn(r)).rjust(w) for _, w, fn in COLUMNS))
        st = r.get("stream")
        if st:
            lines.append(f"{'':>12}verdicts: {st['sent']} commands, {st['answered']} verdicts, "
                         f"{st['sent'] - st['answered']} never arrived; window {r.get('window_steps')} steps "
                         f"({_f(r.get('command_window_ms'), '{:g}')} ms); held {_f(r.get('paused_s'), '{:.3f}')} s")
        if r.get("outcome") != "ok" or r.get("unknown_count"):
            lines.append(f"{'':>12}note: outcome={r.get('outcome')} ({r.get('stopped_reason')}: "
                         f"{r.get('end_detail') or r.get('error') or ''}), {r.get('steps')} of "
                         f"{r.get('steps_budget')} steps; {r.get('unknown_count')} unknown "
                         f"{r.get('action_errors_first') or ''}")
    return "\n".join(lines)


def find_row(rows: list, mode: str, rate: float, obs: bool) -> Optional[dict]:
    for r in rows:
        if r["mode"] == mode and r["rate_hz"] == rate and r["observer"] == obs and not r.get("failed"):
            return r
    return None


def _ratio(a: Any, b: Any) -> str:
    try:
        return f"{a / b:.2f}x" if b else "-"
    except TypeError:
        return "-"


def ratios(rows: list) -> list:
    lines = []
    rates = sorted({r["rate_hz"] for r in rows})
    for rate in rates:
        for obs in (False, True):
            stream, service, inp = (find_row(rows, "stream", rate, obs), find_row(rows, "service", rate, obs),
                                    find_row(rows, "inproc", rate, obs))
            tag = f"@ {rate:g} Hz{' (with observer)' if obs else ''}"
            for name, other in (("service", service), ("in-process", inp)):
                if stream and other:
                    lines.append(
                        f"stream / {name} {tag}: p99 deviation {stream['interval_dev_ms']['p99']:.3f} / "
                        f"{other['interval_dev_ms']['p99']:.3f} ms = "
                        f"{_ratio(stream['interval_dev_ms']['p99'], other['interval_dev_ms']['p99'])}, missed "
                        f"{stream['missed_pct']:.2f} / {other['missed_pct']:.2f} %, steps/s "
                        f"{stream['achieved_hz']:.1f} / {other['achieved_hz']:.1f}, command-to-verdict p50 "
                        f"{stream['c2v_ms']['p50']:.3f} / {other['c2v_ms']['p50']:.3f} ms")
    for mode in ("stream", "service", "inproc"):
        for rate in rates:
            w, wo = find_row(rows, mode, rate, True), find_row(rows, mode, rate, False)
            if w and wo:
                cpu_w = w["cpu"]["bench_cpu_s"]
                cpu_wo = wo["cpu"]["bench_cpu_s"]
                delta_us = (cpu_w / max(1, w["steps"]) - cpu_wo / max(1, wo["steps"])) * 1e6
                extra = ""
                if mode != "inproc" and "counter_cpu_s" in w["cpu"]:
                    extra = f", + counter process {w['cpu']['counter_cpu_pct']:.0f}% CPU"
                lines.append(
                    f"with / without observer, {mode} @ {rate:g} Hz: p99 deviation "
                    f"{w['interval_dev_ms']['p99']:.3f} / {wo['interval_dev_ms']['p99']:.3f} ms = "
                    f"{_ratio(w['interval_dev_ms']['p99'], wo['interval_dev_ms']['p99'])}; bench CPU "
                    f"{w['cpu']['bench_cpu_pct']:.0f} / {wo['cpu']['bench_cpu_pct']:.0f}% = "
                    f"{_ratio(w['cpu']['bench_cpu_pct'], wo['cpu']['bench_cpu_pct'])}; "
                    f"bench CPU delta {delta_us:+.1f} us/step; on the control thread "
                    f"{w['observer_cost'].get('us_per_step', float('nan')):.1f} us/step{extra}")
    return lines


def targets(rows: list, micro: dict) -> list:
    lines = []

    def verdict(ok: bool) -> str:
        return "met   " if ok else "MISSED"

    for mode, rate in [(m, x) for m in ("stream", "service") for x in TARGET_ROS_RATES]:
        r = find_row(rows, mode, rate, True) or find_row(rows, mode, rate, False)
        if not r:
            continue
        p99 = r["interval_dev_ms"]["p99"]
        label = f"ROS ({mode}) {rate:g} Hz"
        lines.append(f"[{verdict(p99 < TARGET_ROS_P99_MS)}] {label} p99 deviation < "
                     f"{TARGET_ROS_P99_MS:g} ms: {p99:.3f} ms ({'with' if r['observer'] else 'without'} observer)")
        lines.append(f"[{verdict(r['missed_pct'] < TARGET_MISSED_PCT)}] {label} missed "
                     f"deadlines < {TARGET_MISSED_PCT:g} %: {r['missed_pct']:.3f} %")
        ev = r.get("events")
        if ev:
            lost = ev.get("lost")
            lines.append(f"[{verdict(lost == 0 and ev.get('missing') == 0 and not ev.get('dropped'))}] {label} "
                         f"zero lost events: published {ev['published']}, dropped "
                         f"{ev['dropped']}, received {ev['received']}, event_seq gaps {ev.get('missing')}")
    for rate in TARGET_INPROC_RATES:
        for obs in (False, True):
            r = find_row(rows, "inproc", rate, obs)
            if r:
                p99 = r["interval_dev_ms"]["p99"]
                lines.append(f"[{verdict(p99 < TARGET_INPROC_P99_MS)}] in-process {rate:g} Hz "
                             f"{'with' if obs else 'without'} observer p99 deviation < {TARGET_INPROC_P99_MS:g} ms: "
                             f"{p99:.3f} ms at {r['achieved_hz']:.1f} steps/s, missed {r['missed_pct']:.2f} %")
    full = micro.get("stamp_build_dispatch_noop_us")
    if full is not None:
        lines.append(f"[{verdict(full < TARGET_OBSERVER_US)}] observer-lane cost < {TARGET_OBSERVER_US:g} us/step "
                     f"(stamp + build RunPolicyStep + dispatch to a no-op, microbench): {full:.2f} us")
    for r in rows:
        if r["mode"] == "inproc" and r["observer"] and not r.get("failed"):
            c = r["observer_cost"].get("us_per_step")
            if c is not None:
                lines.append(f"[{verdict(c < TARGET_OBSERVER_US)}] in-process {r['rate_hz']:g} Hz observer call on the "
                             f"control thread ({r['observer_kind']}): {c:.2f} us/step")
    lines.append(PEER)
    return lines
