"""``demo_job`` (``strands-robots demo-job``): submit a job file, watch it to its end, print the summary.

    demo_job --relay 127.0.0.1:50051 --token-file T [--job-file F]   # as a remote team: the Evaluation Client
    demo_job --ros [--namespace strands] [--job-file F]              # the station's submit_job service

With ``--relay`` it submits the job file's tasks through :class:`~strands_robots.client.EvaluationClient`
(retrying while the relay is not listening yet), serves the file's policy through the relay
(:class:`~strands_robots.policies.demo.DemoPolicy`; a comparison job file's every slot through its own session,
the first slot's policy seeing, the others never shown a camera frame: ``demo_slot_policies``) and polls
``get_status``. With ``--ros`` it calls the
station's ``submit_job`` service (the station runs the file's policy itself) and reads the station's latched
``job_status`` topic. Either way it prints a progress line whenever an episode finishes or the state changes,
then the summary table and ``job <id> <STATE>: <message>``; exit 0 when the job SUCCEEDED, 1 when it ended
otherwise (or could not be submitted, with the reason), 2 for a bad command line or job file, 128 + the signal
after SIGINT/SIGTERM (the job is asked to cancel; ``--stopped-exit-code`` gives another code for that).
rollout.launch.py runs it as its last process: its exit ends the launch, and its exit code is the launch's.

``--policy-provider`` runs the job's tasks with another policy than the file's: the file's policy options and
the tasks' ``policy.*`` options are written for the file's policy and are left out then.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Optional, Sequence

__all__ = ["main", "build_parser", "job_for_run", "submit_request"]

EXIT_FAILED = 1
EXIT_USAGE = 2
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def build_parser(prog: str = "demo_job") -> argparse.ArgumentParser:
    """Return the parser, ``prog`` the name it runs by: the ``demo_job`` executable or ``strands-robots demo-job``."""
    p = argparse.ArgumentParser(
        prog=prog, description="Submit a job file, watch it to its end and print the summary; exit 0 when the job "
                               "SUCCEEDED. --relay: as a remote team through the relay (the file's policy served "
                               "from this process); --ros: the station's submit_job service (the station runs the "
                               "policy).")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--relay", help="HOST:PORT of the relay: submit and serve the policy as a remote team")
    where.add_argument("--ros", action="store_true", help="submit to the station's submit_job service")
    p.add_argument("--token-file", help="--relay: the file holding this client's token")
    p.add_argument("--root-certificates", help="--relay: PEM of the relay's CA (TLS)")
    p.add_argument("--namespace", default="strands", help="--ros: the station's namespace (default %(default)s)")
    p.add_argument("--job-file", default=None, help="the job (default: the package's config/demo_job.yaml)")
    p.add_argument("--station-id", default="", help="the station to run it (default: the job file's)")
    p.add_argument("--policy-provider", default="", help="run the tasks with this policy (default: the file's)")
    p.add_argument("--control-frequency", type=float, default=0.0,
                   help="the tasks' control rate in Hz (default: the file's)")
    p.add_argument("--connect-timeout", type=float, default=60.0,
                   help="how long to wait for the relay or the station to come up, in seconds (default "
                        "%(default)s)")
    p.add_argument("--poll-s", type=float, default=0.5,
                   help="--relay: how often to ask for the job's status, in seconds (default %(default)s)")
    p.add_argument("--stopped-exit-code", type=int, default=None, metavar="CODE",
                   help="exit code after SIGINT/SIGTERM (default 128 + the signal); a launch file gives 0, so a "
                        "process stopped on request ends as cleanly as its nodes")
    return p


def job_for_run(spec: Any, *, station_id: str = "", policy_provider: str = "", control_frequency: float = 0.0) -> Any:
    """Return the job file's job (a ``TeamJob``) as this run submits it: another station, rate or policy.

    Another policy runs without the file's policy options (written for the file's policy); the suite's own
    policy hints stay the station's (a station-run policy that does not take one runs without it).
    """
    import dataclasses

    changes: dict = {}
    if station_id:
        changes["station_id"] = station_id
    if control_frequency:
        changes["choose"] = {**dict(spec.choose), "control_frequency": f"{float(control_frequency):g}"}
    if policy_provider and policy_provider != spec.policy_provider:
        changes.update(policy_provider=policy_provider, policy_config={})
    return dataclasses.replace(spec, **changes) if changes else spec


def submit_request(job: Any, request_type: Any, key_value: Any) -> Any:
    """Return the station's ``SubmitJob`` request of a team's job: suite tasks, trials, choices, own tasks, record."""
    import json

    from strands_robots.client.cli.client_side import free_form_tasks
    from strands_robots.conversions.station import station_task_to_msg
    from strands_robots.station.job_file import task_from_mapping

    request = request_type(client_id=job.client_id, episodes_total=job.episodes,
                           policy_provider=job.policy_provider, policy_config_json=json.dumps(dict(job.policy_config)),
                           suite=job.suite, suite_tasks=[t.task for t in job.tasks],
                           suite_trials=[t.trials for t in job.tasks],
                           choose=[key_value(key=k, value=v) for k, v in job.choose.items()])
    request.tasks = [station_task_to_msg(task_from_mapping(t, i)) for i, t in enumerate(free_form_tasks(job))]
    if job.max_discards is not None:
        request.has_max_discards, request.max_discards = True, int(job.max_discards)
    request.record = bool(job.record)
    return request


class _Progress:
    """Print a progress line when the number of finished episodes or the state changes."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.last: Optional[tuple] = None

    def __call__(self, status: Any) -> None:
        from strands_robots.client.cli.client_side import status_progress

        shown = (len(status.episodes), status.state)
        if shown != self.last:
            self.last = shown
            self.write(f"{status_progress(status)}  {status.state}  {status.message}")


# -- through the relay ------------------------------------------------------------------------------------------
def _run_relay(args: argparse.Namespace, spec: Any, signals: Any) -> int:
    import threading

    from strands_robots.client import EvaluationClient, RelayError
    from strands_robots.policies.demo import DemoPolicy, demo_slot_policies
    from strands_robots.client.cli.client_side import report_final, serve_in_background, submit_job_file, watch_job

    from strands_robots.wire.credentials import CredentialsError, read_secret

    try:  # the team's token: a private file (0600, yours), like every other token file
        token = read_secret(args.token_file, "--token-file")
    except CredentialsError as exc:
        _say(f"[demo_job] {exc}")
        return EXIT_USAGE
    client = EvaluationClient(args.relay, token=token, root_certificates=args.root_certificates or None)
    try:
        job_id = submit_job_file(client, spec, write=_say, prefix="[demo_job]",
                                 connect_timeout_s=args.connect_timeout)
    except RelayError as exc:
        _say(f"[demo_job] the relay at {args.relay} refused the job: {type(exc).__name__}: {exc}")
        return EXIT_FAILED
    served: dict = {}
    if spec.compare is None:
        serve_in_background(client, job_id, DemoPolicy(spec.policy_provider, dict(spec.policy_config)), served)
    else:  # a comparison: each slot its own session, the first slot's policy seeing, the others blind
        for slot, policy in demo_slot_policies(spec.policy_provider, dict(spec.policy_config),
                                               spec.compare.slots).items():
            serve_in_background(client, job_id, policy, served, slot=slot)
    stop = threading.Event()
    threading.Thread(target=lambda: (signals.event.wait(), stop.set()), name="demo-job-signals", daemon=True).start()
    final = watch_job(client, job_id, poll_s=args.poll_s, write=_say, stop=stop)
    if signals.event.is_set():
        return _interrupted(signals, job_id, lambda: client.cancel(job_id, "demo_job was stopped"))
    if "error" in served:
        _say(f"[demo_job] the policy client ended with {type(served['error']).__name__}: {served['error']}")
    if final is None:
        _say(f"[demo_job] no status of job {job_id} was ever received from the relay")
        return EXIT_FAILED
    return report_final(final, _say)


def _stopped_before_submit(signals: Any) -> int:
    _say(f"[demo_job] stopped by signal {signals.signum} before a job was submitted")
    return 128 + signals.signum


def _interrupted(signals: Any, job_id: str, cancel: Callable[[], Any]) -> int:
    try:
        cancel()
        said = "cancel requested"
    except Exception as exc:  # the relay or the station may be going down with us
        said = f"cancel not delivered ({type(exc).__name__})"
    _say(f"[demo_job] stopped by signal {signals.signum} before job {job_id} ended; {said}")
    return 128 + signals.signum


# -- through the station's services -----------------------------------------------------------------------------
class _RosStatus:
    """A ROS ``JobStatus`` read as the client's printers read a snapshot: its figures and comparison as the wire's.

    On ROS the job's figures and a comparison job's result are ``[<=1]`` sequences; the printers take the wire's
    ``pb.JobFigures`` / ``pb.Comparison`` and ask ``HasField`` of them.
    """

    def __init__(self, msg: Any) -> None:
        from strands_robots.conversions.station import pb_from_msg
        from strands_robots.wire.proto.evaluation_pb2 import Comparison, JobFigures

        self._msg = msg
        self.summary = pb_from_msg(msg.summary[0], JobFigures()) if getattr(msg, "summary", None) else None
        self.comparison = (pb_from_msg(msg.comparison[0], Comparison()) if getattr(msg, "comparison", None)
                           else None)

    def HasField(self, name: str) -> bool:  # noqa: N802 - the protobuf message's name, which the printers call
        if name in ("summary", "comparison"):
            return getattr(self, name) is not None
        raise ValueError(f"JobStatus has no optional field {name!r}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._msg, name)


def _run_ros(args: argparse.Namespace, spec: Any, signals: Any) -> int:
    import rclpy
    from diagnostic_msgs.msg import KeyValue
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots_msgs.msg import JobStatus
    from strands_robots_msgs.srv import CancelJob, SubmitJob

    from strands_robots.ros.qos import LATCHED_QOS
    from strands_robots.ros.process import init_without_signal_handlers
    from strands_robots.client.cli.client_side import report_final

    init_without_signal_handlers(["demo_job"])
    node = rclpy.create_node("demo_job")
    ns = "/" + args.namespace.strip("/") if args.namespace.strip("/") else ""
    statuses: list = []
    node.create_subscription(JobStatus, f"{ns}/job_status", statuses.append, LATCHED_QOS)
    submit = node.create_client(SubmitJob, f"{ns}/submit_job")
    cancel = node.create_client(CancelJob, f"{ns}/cancel_job")
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def call(client: Any, request: Any, timeout_s: float) -> Any:
        future = client.call_async(request)
        deadline = time.monotonic() + timeout_s
        while not future.done() and time.monotonic() < deadline and not signals.event.is_set():
            executor.spin_once(timeout_sec=0.1)
        return future.result() if future.done() else None

    try:
        deadline = time.monotonic() + args.connect_timeout
        while not submit.service_is_ready() and not signals.event.is_set():
            if time.monotonic() > deadline:
                _say(f"[demo_job] no station answers {ns}/submit_job after {args.connect_timeout:g} s")
                return EXIT_FAILED
            executor.spin_once(timeout_sec=0.1)
        if signals.event.is_set():
            return _stopped_before_submit(signals)
        request = submit_request(spec, SubmitJob.Request, KeyValue)
        answer = call(submit, request, 30.0)
        if signals.event.is_set() and (answer is None or not answer.accepted):
            return _stopped_before_submit(signals)
        if signals.event.is_set():
            return _interrupted(signals, answer.job_id, lambda: call(cancel, CancelJob.Request(
                job_id=answer.job_id, reason="demo_job was stopped"), 2.0))
        if answer is None:
            _say(f"[demo_job] the station did not answer {ns}/submit_job")
            return EXIT_FAILED
        if not answer.accepted:
            _say(f"[demo_job] the station refused the job: {answer.message}")
            return EXIT_FAILED
        job_id = answer.job_id
        _say(f"[demo_job] submitted job {job_id} to {ns}/submit_job: {spec.episodes} episodes of "
             f"{len(spec.tasks) + len(spec.free_form)} tasks; the station runs the {spec.policy_provider} policy")
        progress = _Progress(_say)
        while not signals.event.is_set():
            executor.spin_once(timeout_sec=0.1)
            mine = [s for s in statuses if s.job_id == job_id]
            statuses.clear()
            for status in map(_RosStatus, mine):
                progress(status)
                if status.state in TERMINAL:
                    return report_final(status, _say)
        return _interrupted(signals, job_id, lambda: call(cancel, CancelJob.Request(
            job_id=job_id, reason="demo_job was stopped"), 2.0))
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv: Optional[Sequence[str]] = None, prog: str = "demo_job") -> int:
    args = build_parser(prog).parse_args(argv)
    if args.relay and not args.token_file:
        print("demo_job: --relay needs --token-file (the client's token)", file=sys.stderr, flush=True)
        return EXIT_USAGE
    from strands_robots.cli.bringup import job_file_refusal
    from strands_robots.job_model.team_job import load_team_job
    from strands_robots.cli.station_demo import default_demo_job
    from strands_robots.stop_signals import StopSignals

    from strands_robots.package_files import PackageFileNotFound

    try:
        job_file = args.job_file or default_demo_job()
    except PackageFileNotFound as exc:
        print(f"demo_job: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    reason = job_file_refusal(job_file)
    if reason:
        print(f"demo_job: {reason}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    spec = job_for_run(load_team_job(job_file), station_id=args.station_id, policy_provider=args.policy_provider,
                       control_frequency=args.control_frequency)
    if args.ros and spec.compare is not None:
        print(f"demo_job: {job_file} is a comparison job (compare: slots {', '.join(spec.compare.slots)}): its slots "
              f"are served through a relay, run it with --relay", file=sys.stderr, flush=True)
        return EXIT_USAGE
    # For the rest of the process: a launcher's second SIGINT during the stop must not kill it.
    signals = StopSignals.install()
    try:
        code = _run_relay(args, spec, signals) if args.relay else _run_ros(args, spec, signals)
    finally:
        signals.restore()
    if signals.signum and code == 128 + signals.signum and args.stopped_exit_code is not None:
        return args.stopped_exit_code
    return code


if __name__ == "__main__":
    sys.exit(main())
