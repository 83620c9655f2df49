"""The main job: a simulated station evaluating a policy through the relay, end to end, on one machine.

:func:`run_demo` (``strands-robots up`` with no ``--relay``):

1. a local relay process (``python -m strands_robots.relay``) with tokens in a YAML file generated now (one
   client, one station) and its SQLite store in a private directory of the run (removed when the run ends,
   however it ends: :mod:`strands_robots.private_dir`);
2. the arm driver, the camera node (``scene`` and ``wrist`` of ``config/cameras.yaml``, rendered offscreen from
   the driver's joint states), the rollout node (with its takeover services; every observation holds
   ``<camera>.image``) and the station node, as processes under a
   :class:`~strands_robots.supervisor.Supervisor` (every child ends with it, however it ends);
3. the demo job (``config/demo_job.yaml``) submitted through :class:`~strands_robots.client.EvaluationClient`
   exactly as a remote team would, and :class:`~strands_robots.policies.demo.DemoPolicy` served through the
   relay: the job file's policy
   (the mock policy or the scripted torque policy), with its ``policy.*`` task parameters, run on the client;
4. a progress bar of finished episodes while the job runs, then a summary table (episode, end condition,
   scored, success, score, taken over) and the success rate and mean score over the scored episodes that were
   not taken over;
5. then a comparison job through the relay (``config/demo_compare.yaml``): the vision policy (slot ``vision``)
   against the same policy never shown a camera frame (slot ``blind``) on the demo suite's ``reach_cube_quick``,
   each slot served by its own ``serve_policy(..., slot=...)``; it stops once the anytime-valid test separates
   them and prints each slot's rate with its interval, the paired difference, the verdict with the block it
   stopped at, and the blocks' recorded order. Exit 0 when both jobs SUCCEEDED.

With ``record`` (``up --record FILE``) ``strands-robots record`` runs beside the nodes, and the job is submitted
only once it is matched with the publishers of the episodes' reliable topics and the camera frames (what is
published before a match never reaches it): the file holds the whole demo job, for ``report`` and ``export``; it
is closed before the comparison starts (:data:`RECORDER_SETTLE_S` after the job ended), so it holds that job only.

:func:`run_station` (``strands-robots up --relay-credentials FILE``): the same three nodes taking jobs from the
relay that credentials file names until Ctrl-C. :class:`LocalStation` is the process set both use (and the
system tests). The station and rollout nodes get the relay and the station's token only from a 0600 credentials
file (their read-only ``relay_credentials_file`` parameter); with a local relay it is written now, into a private
directory (0700) of the work dir.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

from strands_robots.client.cli.client_side import report_final, serve_in_background, submit_job_file, watch_job
from strands_robots.policies.demo import DemoPolicy
from strands_robots.private_dir import PrivateDir

__all__ = ["LocalStation", "run_demo", "run_station", "default_demo_job", "config_file",
           "free_port"]

DEMO_CLIENT = "demo"
DEMO_STATION = "sim_station"
DEMO_CAMERAS = "scene,wrist"
# What the demo's recorder must be matched with before the job is submitted: what the episodes publish on reliable
# volatile topics (their samples from before a match never reach it), and the camera frames.
RECORDED_BEFORE_SUBMIT = ("observer_events", "episode_results", "action_commands", "action_verdicts")
WORKDIR_PREFIX = "strands_station_"  # the private directory of a demo or station run
RECORDER_MATCH_S = 120.0  # the nodes' publishers discovered by the recorder, on a loaded 2-core machine
#: The station publishes a job's last messages before it reports the job's end to the relay, where the demo reads
#: it; the recorder is given this long more to take them in over loopback before it is closed.
RECORDER_SETTLE_S = 2.0


def config_file(name: str) -> str:
    """``config/<name>`` of the package (installed or in the checkout: :mod:`strands_robots.package_files`).

    :raises strands_robots.package_files.PackageFileNotFound: nowhere (the message says where it looked).
    """
    from strands_robots.package_files import config_path

    return config_path(name)


def default_demo_job() -> str:
    return config_file("demo_job.yaml")


def default_demo_compare() -> str:
    return config_file("demo_compare.yaml")


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the processes ------------------------------------------------------------------------------------------
class LocalStation:
    """A simulated station's processes (and, with no ``relay``, its local relay) under one supervisor.

    :param workdir: tokens, the relay's store, the station's state and the parameters files go here.
    :param namespace: ROS namespace of the three nodes.
    :param relay_credentials: the credentials file (0600) of an existing relay and this station; None: a local
        relay is started (:meth:`start_relay`) and a credentials file written for it.
    :param station_params: extra station node parameters (``-p``).
    :param out: where children's output lines go (``(name, line)``); None prints them prefixed.
    :param cameras: comma-separated cameras of ``config/cameras.yaml`` the camera node renders and every
        observation holds; empty (the default): no camera node. The demo and ``run_station`` give
        :data:`DEMO_CAMERAS`.
    :param relay_args: more options of the local relay's command line (e.g. ``--web 127.0.0.1:0``).
    """

    def __init__(self, workdir: str, *, namespace: str = "station", station_id: str = DEMO_STATION,
                 relay_credentials: Optional[str] = None, station_params: Optional[dict] = None,
                 rollout_params: Optional[dict] = None, out: Optional[Callable[[str, str], None]] = None,
                 control_frequency: float = 50.0, tls: Optional[tuple] = None,
                 cameras: str = "", driver_params: Optional[dict] = None,
                 driver_env: Optional[dict] = None, relay_args: Sequence[str] = ()) -> None:
        from strands_robots.supervisor import Supervisor

        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.namespace = namespace.strip("/")
        self.station_id = station_id
        self.sup = Supervisor()
        self.stopped_on_purpose: set = set()  # children stopped while the others run on (the recorder)
        self.out = out
        self.control_frequency = float(control_frequency)
        self.station_params = dict(station_params or {})
        self.rollout_params = dict(rollout_params or {})
        self.client_token = ""
        self.station_token = ""
        self.relay_proc: Any = None
        self.relay_target = ""
        self.relay_credentials = relay_credentials or ""
        if relay_credentials:
            from strands_robots.wire.credentials import load_relay_credentials

            credentials = load_relay_credentials(relay_credentials)  # one line when it is not usable
            self.relay_target, self.station_id = credentials.target, credentials.station_id
        self.relay_ready = threading.Event()
        self.relay_args = tuple(relay_args)  # more options of the local relay (e.g. --web 127.0.0.1:0)
        self.store_path = str(self.workdir / "relay.sqlite")
        self.tokens_path = str(self.workdir / "tokens.yaml")
        self.state_dir = str(self.workdir / "station_state")
        self.tls = tls  # (certificate PEM path, key PEM path): the local relay serves TLS, everyone trusts it
        self.cameras = cameras.strip()  # the camera node's cameras (config/cameras.yaml); "": no camera node
        # the arm driver's hardware (``up --hardware``): extra parameters, extra environment
        self.driver_params = dict(driver_params or {})
        self.driver_env = dict(driver_env or {})

    # -- relay ----------------------------------------------------------------------------------------------
    def write_tokens(self) -> None:
        import yaml

        if not self.client_token:
            self.client_token = secrets.token_urlsafe(24)
            self.station_token = secrets.token_urlsafe(24)
        data = {"clients": {DEMO_CLIENT: self.client_token}, "stations": {self.station_id: self.station_token}}
        fd = os.open(self.tokens_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(data, handle)

    def start_relay(self, port: Optional[int] = None) -> str:
        """Start (or restart, on the same port and store) the local relay; returns its target."""
        if not os.path.exists(self.tokens_path):
            self.write_tokens()
        if port is None:
            port = int(self.relay_target.rsplit(":", 1)[1]) if self.relay_target else free_port()
        self.relay_target = f"127.0.0.1:{port}"
        self.relay_ready.clear()

        def on_line(name: str, line: str) -> None:
            if "relay listening" in line:
                self.relay_ready.set()
            self._emit(name, line)

        argv = [sys.executable, "-m", "strands_robots.relay", "--listen", self.relay_target, "--store",
                f"sqlite:{self.store_path}", "--tokens", self.tokens_path, "--poll-s", "0.2"]
        if self.tls:
            argv += ["--tls-cert", str(self.tls[0]), "--tls-key", str(self.tls[1])]
        argv += list(self.relay_args)
        self.relay_proc = self.sup.start("relay", argv, on_line=on_line)
        if not self.relay_ready.wait(30.0):
            raise RuntimeError(f"the relay did not start listening on {self.relay_target}")
        return self.relay_target

    def stop_relay(self) -> None:
        """SIGKILL the relay (a relay lost mid-job)."""
        import signal

        if self.relay_proc is not None and self.relay_proc.poll() is None:
            os.killpg(self.relay_proc.pid, signal.SIGKILL)
            self.relay_proc.wait(10.0)

    # -- nodes ----------------------------------------------------------------------------------------------
    def credentials_file(self) -> str:
        """Return the station's relay credentials file ("" without a relay), written for a local relay."""
        if self.relay_credentials or not self.relay_target:
            return self.relay_credentials
        from strands_robots.cli.bringup import write_relay_credentials

        private = self.workdir / "credentials"
        private.mkdir(mode=0o700, exist_ok=True)
        os.chmod(private, 0o700)
        token_file = private / "station_token"
        fd = os.open(str(token_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(self.station_token)
        self.relay_credentials = write_relay_credentials(str(private), self.relay_target, self.station_id,
                                                         str(token_file), str(self.tls[0]) if self.tls else None)
        return self.relay_credentials

    def _node_argv(self, module: str, name: str, params_file: str, overrides: dict) -> list:
        argv = [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}", "-r",
                f"__ns:=/{self.namespace}", "--params-file", params_file]
        for key, value in overrides.items():
            argv += ["-p", f"{key}:={value}"]
        return argv

    def start_nodes(self) -> None:
        hz = f"{self.control_frequency:.1f}"
        self.start_driver()
        # The station moves the arms to the start pose itself (start_pose_unreached is its end condition). The
        # dead-driver bound is widened to its 0.5 s ceiling: five processes share a small machine here.
        # Episodes are recorded when their job asks (record: true): into the station's state directory, beside the
        # uploads pending for them, so a restarted station still has the files it must send.
        rollout = {"control_frequency": hz, "start_pose_before_episode": "false", "record": "false",
                   "policy_provider": "mock", "driver_silence_s": "0.5",
                   "recording_dir": os.path.join(self.station_params.get("state_dir") or self.state_dir,
                                                 "recordings")}
        if self.cameras:  # its own process: rendering never runs in the driver's control loop
            self.start_camera()
            rollout.update(cameras=self.cameras, camera_scene_node="camera")
        rollout.update(self.rollout_params)
        self._rollout_overrides = rollout
        self.start_rollout()
        self.start_station()

    def start_driver(self) -> Any:
        """Start (or restart) the arm driver on its hardware (MuJoCo unless ``driver_params`` names another)."""
        params = {"control_rate_hz": f"{self.control_frequency:.1f}", "autostart": "true", **self.driver_params}
        env = dict(os.environ, **self.driver_env) if self.driver_env else None
        self.driver = self.sup.start("arm_driver", self._node_argv(
            "strands_robots.nodes.arm_driver.node", "arm_driver", config_file("rollout.yaml"), params),
            env=env, on_line=self._emit)
        return self.driver

    def start_camera(self) -> Any:
        """Start (or restart) the camera node rendering :attr:`cameras`."""
        self.camera = self.sup.start("camera", self._node_argv(
            "strands_robots.nodes.camera.node", "camera", config_file("rollout.yaml"),
            {"cameras": self.cameras}), on_line=self._emit)
        return self.camera

    def start_rollout(self) -> Any:
        """Start (or restart) the rollout node, with its takeover services (and, with a relay, its credentials)."""
        overrides = dict(self._rollout_overrides)
        if self.credentials_file():
            overrides["relay_credentials_file"] = self.credentials_file()
        self.rollout = self.sup.start("rollout", self._node_argv(
            "strands_robots.nodes.rollout.node", "rollout", config_file("rollout.yaml"),
            overrides), on_line=self._emit)
        return self.rollout

    def start_station(self) -> Any:
        """Start (or restart) the station node (with a relay, its credentials file)."""
        params = {"station_id": self.station_id, "state_dir": self.state_dir}
        if self.credentials_file():
            params["relay_credentials_file"] = self.credentials_file()
        params.update(self.station_params)
        self.station = self.sup.start("station", self._node_argv(
            "strands_robots.nodes.station.node", "station", config_file("station.yaml"), params), on_line=self._emit)
        return self.station

    def kill_station(self, sig: int = 9) -> int:
        """Signal the station node (default SIGKILL: a station lost mid-job) and wait for it; its exit code."""
        if self.station.poll() is None:
            os.killpg(self.station.pid, sig)
        return self.station.wait(20.0)

    def client(self) -> Any:
        from strands_robots.client import EvaluationClient

        return EvaluationClient(self.relay_target, token=self.client_token,
                                root_certificates=str(self.tls[0]) if self.tls else None)

    def _emit(self, name: str, line: str) -> None:
        if self.out is not None:
            self.out(name, line)
        else:
            print(f"[{name}] {line}", flush=True)

    def start_recorder(self, path: str) -> Any:
        """Start ``strands-robots record -o path`` on the namespace and wait until it is matched (see the module).

        RuntimeError when it exits or is not matched within :data:`RECORDER_MATCH_S`. It is stopped last.
        """
        import re

        topics = [f"/{self.namespace}/{name}" for name in RECORDED_BEFORE_SUBMIT]
        cameras = [c for c in self.cameras.split(",") if c]
        topics += [f"/{self.namespace}/{camera}/image_raw/compressed" for camera in cameras]
        matched: set = set()
        all_matched = threading.Event()
        line_re = re.compile(r"^matched (\S+): [1-9]\d* publisher\(s\)$")

        def on_line(name: str, line: str) -> None:
            found = line_re.match(line.strip())
            if found and found.group(1) in topics:
                matched.add(found.group(1))
                if len(matched) == len(topics):
                    all_matched.set()
            self._emit(name, line)

        argv = [sys.executable, "-m", "strands_robots.monitoring.record", "-o", path, "--namespace",
                self.namespace, "--latch-wait", "1"] + (["--cameras", *cameras] if cameras else [])
        recorder = self.sup.start("recorder", argv, on_line=on_line)
        deadline = time.monotonic() + RECORDER_MATCH_S
        while not all_matched.wait(0.1):
            if recorder.poll() is not None or time.monotonic() > deadline:
                missing = ", ".join(sorted(set(topics) - matched))
                raise RuntimeError(f"the recorder {'exited' if recorder.poll() is not None else 'was not matched'} "
                                   f"before the job could start (no publisher matched on {missing})")
        return recorder

    def stop_recorder(self, settle_s: float) -> None:
        """Close the recording (its file complete) ``settle_s`` after now, leaving every node running."""
        recorder = self.sup.procs.get("recorder")
        if recorder is None or recorder.poll() is not None:
            return
        time.sleep(settle_s)
        self.stopped_on_purpose.add("recorder")
        self.sup.stop_one("recorder")

    def stop(self) -> None:
        """Stop the station, then the rollout, then the rest (each node's last calls reach the ones it calls).

        A recorder goes last, once every node is gone: the file holds their last messages.
        """
        rest = [name for name in self.sup.procs if name not in ("station", "rollout", "recorder")]
        self.sup.stop_all(first=("station", "rollout", *rest))

    def __enter__(self) -> "LocalStation":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# -- the commands ------------------------------------------------------------------------------------------
def run_demo(job_file: Optional[str] = None, *, namespace: str = "station", quiet_nodes: bool = True,
             timeout_s: Optional[float] = None, write: Callable[[str], None] = print,
             on_final: Optional[Callable[[Any], None]] = None, record: Optional[str] = None,
             driver_params: Optional[dict] = None, driver_env: Optional[dict] = None,
             compare_file: Optional[str] = None) -> int:
    """Run the main job end to end on this machine (see the module docstring).

    0 when the job (and the comparison) SUCCEEDED, 1 when one ended otherwise, 128 + the signal after Ctrl-C /
    SIGTERM.

    :param on_final: called with the job's last status (``pb.JobStatus``) when one was received.
    :param record: an MCAP file the whole job is recorded to (``strands-robots record`` beside the nodes).
    :param compare_file: the comparison job run after the job (None: ``config/demo_compare.yaml`` after the
        default demo job, none after another job file; "": none).
    """
    from strands_robots.ros.process import StopSignals
    from strands_robots.job_model.team_job import load_team_job

    spec = load_team_job(job_file or default_demo_job())
    if compare_file is None:
        compare_file = "" if job_file else default_demo_compare()
    compare_spec = load_team_job(compare_file) if compare_file else None
    if compare_spec is not None and compare_spec.compare is None:
        raise ValueError(f"{compare_file}: not a comparison job (it has no compare: slots)")
    log_lines: List[str] = []

    def out(name: str, line: str) -> None:
        log_lines.append(f"[{name}] {line}")
        # errors, and who cleared which safety stop (a person's act, so it is shown even when nodes are quiet)
        if not quiet_nodes or " ERROR" in line or "Traceback" in line or "cleared the safety stop" in line:
            write(f"[{name}] {line}")

    # tokens, the relay's store and the station's state: removed when this process ends, however it ends
    with PrivateDir(WORKDIR_PREFIX) as private, StopSignals() as signals:
        station = LocalStation(private.path, namespace=namespace, station_id=spec.station_id, out=out,
                               control_frequency=spec.control_frequency or 50.0, cameras=DEMO_CAMERAS,
                               driver_params=driver_params, driver_env=driver_env)
        final = compared = None
        served: dict = {}
        died: dict = {}
        try:
            target = station.start_relay()
            write(f"[demo] relay on {target} (store {station.store_path}); starting the arm driver, rollout and "
                  "station nodes")
            station.start_nodes()
            if record:
                station.start_recorder(record)
                write(f"[demo] recording to {record}")
            client = station.client()
            # Stop watching on Ctrl-C, and as soon as a node or the relay exits: a job whose station is gone
            # never ends, so waiting for it would hang the demo.
            stop = threading.Event()

            def watch_children() -> None:
                while not stop.is_set():
                    if signals.event.is_set():
                        stop.set()
                        return
                    for name, proc in list(station.sup.procs.items()):
                        if proc.poll() is not None and name not in station.stopped_on_purpose:
                            died[name] = proc.returncode
                            stop.set()
                            return
                    stop.wait(0.2)

            threading.Thread(target=watch_children, name="demo-children", daemon=True).start()
            job_id = submit_job_file(client, spec, write=write)
            serve_in_background(client, job_id, DemoPolicy(spec.policy_provider, dict(spec.policy_config)), served)
            final = watch_job(client, job_id, write=write, stop=stop, timeout_s=timeout_s)
            if compare_spec is not None and final is not None and final.state == "SUCCEEDED" and not stop.is_set():
                report_final(final, write)  # the job's table first; the comparison's follows once it ends
                if record:
                    station.stop_recorder(RECORDER_SETTLE_S)
                    write(f"[demo] recorded the job to {record}")
                job_id = submit_job_file(client, compare_spec, write=write)
                compared = _serve_and_watch_comparison(client, job_id, compare_spec, write, stop, timeout_s, served)
                if compared is None or compared.state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    final = None  # the comparison never ended: said below like a job that never ended
            stop.set()
            if died and (final is None or final.state not in ("SUCCEEDED", "FAILED", "CANCELLED")):
                name, code = next(iter(died.items()))
                write(f"\n[demo] {name} exited with code {code} before the job ended; stopping")
                for line in log_lines[-20:]:
                    write(line)
                final = None
            if signals.event.is_set():
                write("\n[demo] stopping: cancelling the job and ending the nodes")
                try:
                    client.cancel(job_id, "the demo was interrupted")
                except Exception:
                    pass
        finally:
            station.stop()
            write("[demo] stopped: " + ", ".join(f"{name} exit {proc.returncode}"
                                                for name, proc in station.sup.procs.items()))
        if signals.signum:
            return 128 + signals.signum
        if "error" in served:
            write(f"[demo] the policy client ended with {type(served['error']).__name__}: {served['error']}")
        if final is None:
            if not died:
                write("[demo] no status of the job was ever received")
            return 1
        if on_final is not None:
            on_final(final)
        if compared is not None:
            return 1 if report_final(compared, write) or final.state != "SUCCEEDED" else 0
        return report_final(final, write)


def _serve_and_watch_comparison(client: Any, job_id: str, spec: Any, write: Callable[[str], None],
                                stop: threading.Event, timeout_s: Optional[float], served: dict) -> Any:
    """Serve each slot of the comparison with its own client session; return the job's last status.

    The first slot's policy sees, the others are blind (``policies.demo.demo_slot_policies``).
    """
    from strands_robots.policies.demo import demo_slot_policies

    slots = tuple(spec.compare.slots)
    policies = demo_slot_policies(spec.policy_provider, dict(spec.policy_config), slots)
    write(f"[demo] comparison {job_id}: slot {slots[0]} serves the {spec.policy_provider} policy, "
          f"{', '.join(slots[1:])} the same policy never shown a camera frame; each slot through its own session")
    for slot, policy in policies.items():
        served[slot] = {}
        serve_in_background(client, job_id, policy, served[slot], slot=slot)
    return watch_job(client, job_id, write=write, stop=stop, timeout_s=timeout_s)


def run_station(relay_credentials: str, *, namespace: str = "station", state_dir: Optional[str] = None,
                write: Callable[[str], None] = print, driver_params: Optional[dict] = None,
                driver_env: Optional[dict] = None) -> int:
    """Run the station's three nodes taking jobs from the relay until Ctrl-C / SIGTERM (128 + the signal).

    :param relay_credentials: the station's credentials file (0600): the relay, the station id, its token.
    """
    from strands_robots.ros.process import StopSignals

    with PrivateDir(WORKDIR_PREFIX) as private, StopSignals() as signals:
        station = LocalStation(private.path, namespace=namespace, relay_credentials=relay_credentials,
                               station_params={"state_dir": state_dir} if state_dir else None, cameras=DEMO_CAMERAS,
                               driver_params=driver_params, driver_env=driver_env)
        try:
            station.start_nodes()
            write(f"[up] station {station.station_id} takes jobs from {station.relay_target}; Ctrl-C stops it")
            while not signals.event.wait(0.5):
                for name in ("arm_driver", "camera", "rollout", "station"):
                    proc = station.sup.procs.get(name)
                    if proc is not None and proc.poll() is not None:
                        write(f"[up] {name} exited with {proc.returncode}")
                        return 1
        finally:
            station.stop()
        return 128 + signals.signum if signals.signum else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m strands_robots.cli.station_demo")
    p.add_argument("--job-file", default=None)
    p.add_argument("--relay-credentials", default=None, help="the station's 0600 relay credentials file")
    p.add_argument("--namespace", default="station")
    p.add_argument("--verbose", action="store_true", help="print every node's output")
    p.add_argument("--record", default=None, metavar="FILE", help="record the whole demo job to this MCAP file")
    p.add_argument("--compare-file", default=None, metavar="FILE",
                   help="the comparison job after the demo job (default: demo_compare.yaml after the default job)")
    p.add_argument("--no-compare", action="store_true", help="no comparison job after the demo job")
    args = p.parse_args(argv)
    if args.relay_credentials:
        return run_station(args.relay_credentials, namespace=args.namespace)
    return run_demo(args.job_file, namespace=args.namespace, quiet_nodes=not args.verbose, record=args.record,
                    compare_file="" if args.no_compare else args.compare_file)


if __name__ == "__main__":
    sys.exit(main())
