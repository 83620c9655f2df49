"""station_node: evaluation jobs on the arms — a thin rclpy shell around the station core's ``JobRunner``.

Jobs come from the relay (``relay_target``: the station connects out, takes the jobs addressed to
``station_id``, reports every snapshot plus a heartbeat, keeps a backlog while the relay is away) or from the
``submit_job`` service. They run one at a time, each on the station's job thread (node callbacks never wait for
an episode): :class:`~strands_robots.station.episodes.JobRunner` over
:class:`~strands_robots.nodes.station_robot_port.RosRobotPort` (the arm driver's lease and start pose, the
rollout node's ``run_episode`` action and takeover services) and an operator (``operator: scripted`` — the
:class:`~strands_robots.station.operator.ScriptedOperator` of a simulated station, driven by task parameters —
or ``manual``: the operator services below, a person's answers).

Services: ``submit_job`` (SubmitJob), ``cancel_job`` (CancelJob), ``get_status`` (GetStatus); operator:
``takeover`` (Takeover), ``resume`` (Resume), ``discard`` (Discard), ``submit_score_sheet`` (SubmitScoreSheet).
Topics: ``job_status`` (JobStatus, transient local: a late subscriber gets the latest snapshot) and
``~/episode_results`` (EpisodeResult, each finished episode of a job once, with its id and sheet; a private name
because the rollout node's ``episode_results`` in the same namespace carries every rollout).

Restart safety: every job's state is persisted under ``state_dir`` (``station.persistence.JobStore``) after each
change. A restarted station reloads the jobs that had not ended and resumes each (the episode that was running
has no result; its task runs again as a new episode) or fails it with the reason when it restarted too often
(``persistence.recover``); jobs that had ended are re-reported so the relay has their final snapshot.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any, Dict, Optional

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from strands_robots_msgs.msg import EpisodeResult, JobStatus
from strands_robots_msgs.srv import CancelJob, Discard, GetStatus, Resume, SubmitJob, SubmitScoreSheet, Takeover

from strands_robots import convert
from strands_robots.nodes import process
from strands_robots.nodes._qos import EVENT_QOS, LATCHED_QOS
from strands_robots.nodes.process import StopSignals, init_without_signal_handlers, spin_in_background
from strands_robots.nodes.station_robot_port import RelaySettings, RosRobotPort
from strands_robots.station.episodes import JobRunner, ProcedureSettings
from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.model import TERMINAL_STATES, JobState
from strands_robots.station.operator import ScriptedOperator
from strands_robots.station.persistence import JobStore, PersistenceError, recover
from strands_robots.station.record import JobRecord
from strands_robots.station.status import make_snapshot

__all__ = ["StationNode", "ManualOperator", "main", "PARAMETERS"]

PARAMETERS = {
    "station_id": ("sim_station", "this station's id (jobs addressed to it; the relay token's station)"),
    "relay_target": ("", "host:port of the relay; empty: no relay (jobs only from submit_job)"),
    "station_token": ("", "the station's relay token (prefer station_token_file)"),
    "station_token_file": ("", "file holding the station's relay token"),
    "relay_root_certificates": ("", "PEM file of the relay's CA for TLS; empty: plain"),
    "state_dir": ("/tmp/strands_robots/station", "where job state is persisted (one JSON file per job)"),
    "driver_namespace": ("", "the arm driver's namespace; empty: this node's"),
    "rollout_namespace": ("", "the rollout node's namespace; empty: this node's"),
    "robot_name": ("sim_arms", "robot name in the rollout's RunPolicyStarted"),
    "operator": ("scripted", "scripted (simulated station, driven by task parameters) or manual (services)"),
    "operator_name": ("station-operator", "the name operator actions and safety resets are made under"),
    "lease_holder": ("station", "the holder name of the rollout's lease"),
    "lease_priority": (10, "the rollout's lease priority (an operator claims above it)"),
    "lease_duration_s": (1.0, "lease length; renewed every third of it while the episode runs"),
    "action_horizon": (8, "longest action chunk the rollout applies"),
    "async_rtc": (False, "prefetch the next chunk while one plays (hides a remote policy's round trip)"),
    "rtc_inference_timeout_s": (0.0, "async inference deadline; 0 uses the rollout node's"),
    "scoring_timeout_s": (0.0, "keep an episode unscored when no sheet comes within this; 0: wait"),
    "attach_timeout_s": (10.0, "relay provider: how long an episode waits for the policy client"),
    "reply_timeout_s": (10.0, "relay provider: how long each policy call waits for its answer"),
    "heartbeat_s": (2.0, "relay heartbeat period when nothing changes"),
    "record": (False, "record every rollout to MCAP (in the rollout node's recording_dir)"),
}


class ManualOperator:
    """The operator port of a station with a person at it: no scripted actions.

    Everything comes through the node's operator services (takeover, resume, discard, submit_score_sheet).
    """

    def episode_started(self, plan: Any, console: Any) -> None:
        return None

    def rollout_progress(self, plan: Any, rollout_time_s: float, console: Any) -> None:
        return None

    def rollout_ended(self, pending: Any, final_observation: Any, console: Any) -> None:
        return None

    def close(self) -> None:
        return None


class _ClosingStore:
    """The job store as the runner sees it: saves stop once the node is closing.

    What a job does while the process goes down (a rollout stopped under it) is never persisted, so the
    restarted station resumes the job from its last state instead of finding it failed.
    """

    def __init__(self, store: JobStore, closing: threading.Event) -> None:
        self._store = store
        self._closing = closing

    def save(self, record: JobRecord) -> None:
        if not self._closing.is_set():
            self._store.save(record)


class StationNode(Node):
    """The station (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("station", **kwargs)
        for name, (default, description) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=description))
        if self.p("operator") not in ("scripted", "manual"):
            raise ValueError(f"operator must be scripted or manual, got {self.p('operator')!r}")
        self.station_id = self.p("station_id")
        if not self.station_id:
            raise ValueError("station_id must be a non-empty string")
        self._group = ReentrantCallbackGroup()
        self._status_pub = self.create_publisher(JobStatus, "job_status", LATCHED_QOS)
        # Private name (<ns>/station/episode_results): the rollout node's own episode_results in the same namespace
        # carries every rollout, this one the job's finished episodes with their ids and sheets.
        self._results_pub = self.create_publisher(EpisodeResult, "~/episode_results", EVENT_QOS)
        self.store = JobStore(self.p("state_dir"))
        self._lock = threading.RLock()
        self._latest: Dict[str, Any] = {}  # job_id -> latest station.model.JobStatus
        self._published_episodes: Dict[str, int] = {}
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._queued: Dict[str, JobRecord] = {}
        self._cancel_requests: Dict[str, str] = {}
        self._current: Optional[JobRunner] = None
        self._closing = threading.Event()

        self.link = None
        relay = None
        target = self.p("relay_target")
        if target:
            token = self.p("station_token") or _read_token(self.p("station_token_file"))
            from strands_robots.relay.station_link import StationLink

            relay = RelaySettings(target, self.station_id, token, self.p("station_token_file"),
                                  self.p("attach_timeout_s"), self.p("reply_timeout_s"),
                                  self.p("relay_root_certificates"))
            self.link = StationLink(target, self.station_id, token, on_job=self._on_relay_job,
                                    on_cancel=self._on_relay_cancel, heartbeat_s=self.p("heartbeat_s"),
                                    root_certificates=self.p("relay_root_certificates") or None)
        self.robot = RosRobotPort(self, driver_namespace=self.p("driver_namespace"),
                                  rollout_namespace=self.p("rollout_namespace"), robot_name=self.p("robot_name"),
                                  relay=relay, link=self.link, action_horizon=self.p("action_horizon"),
                                  operator_name=self.p("operator_name"), async_rtc=self.p("async_rtc"),
                                  rtc_inference_timeout_s=self.p("rtc_inference_timeout_s"), record=self.p("record"))
        timeout = self.p("scoring_timeout_s")
        self.settings = ProcedureSettings(lease_holder=self.p("lease_holder"), lease_priority=self.p("lease_priority"),
                                          lease_duration_s=self.p("lease_duration_s"),
                                          scoring_timeout_s=timeout if timeout > 0 else None)
        g = self._group
        self.create_service(SubmitJob, "submit_job", self._on_submit, callback_group=g)
        self.create_service(CancelJob, "cancel_job", self._on_cancel, callback_group=g)
        self.create_service(GetStatus, "get_status", self._on_get_status, callback_group=g)
        self.create_service(Takeover, "takeover", self._on_takeover, callback_group=g)
        self.create_service(Resume, "resume", self._on_resume, callback_group=g)
        self.create_service(Discard, "discard", self._on_discard, callback_group=g)
        self.create_service(SubmitScoreSheet, "submit_score_sheet", self._on_score_sheet, callback_group=g)

        self._recover_jobs()
        if self.link is not None:
            self.link.start()
        self._worker = threading.Thread(target=self._work, name="station-jobs", daemon=True)
        self._worker.start()
        self.get_logger().info(f"station {self.station_id} ready (relay {target or 'none'}, operator "
                               f"{self.p('operator')}, state in {self.p('state_dir')})")

    def p(self, name: str) -> Any:
        return self.get_parameter(name).value

    # -- jobs ------------------------------------------------------------------------------------------------
    def _recover_jobs(self) -> None:
        """Reload persisted jobs: resume (or fail) those that had not ended, re-report those that had."""
        try:
            records = list(self.store.load_all())
        except PersistenceError as exc:
            self.get_logger().error(f"cannot read the persisted jobs: {exc}")
            return
        for record in records:
            if record.state in TERMINAL_STATES:
                self._note(make_snapshot(job_id=record.job_id, station_id=record.spec.station_id, state=record.state,
                                         episodes_total=record.spec.episodes_total, episodes=record.episodes,
                                         message=record.message), publish_episodes=False)
                continue
            recovered = recover(record)
            self.get_logger().warning(f"job {record.job_id} found {record.state.value} after a restart: "
                                      f"{recovered.message}")
            self._enqueue(recovered)

    def _enqueue(self, record: JobRecord) -> None:
        with self._lock:
            self._queued[record.job_id] = record
        self._queue.put(record)

    def known(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._latest or job_id in self._queued

    def _on_relay_job(self, job: Any) -> None:
        """Link thread: a job from the relay. Known ones (resumed from disk) are not taken twice."""
        if self.known(job.job_id):
            with self._lock:
                latest = self._latest.get(job.job_id)
            if latest is not None and latest.state in TERMINAL_STATES and self.link is not None:
                self.link.report(latest)  # the relay missed the end: tell it again
            return
        try:
            spec = validate_job_spec(JobSpec(
                job_id=job.job_id, client_id=job.client_id or "relay", station_id=self.station_id,
                tasks=tuple(convert.task_from_pb(t) for t in job.tasks), episodes_total=int(job.episodes_total),
                policy_provider="relay"))
        except (JobSpecError, ValueError) as exc:
            self.get_logger().error(f"job {job.job_id} from the relay refused: {exc}")
            record = JobRecord(_placeholder_spec(job, self.station_id), state=JobState.FAILED,
                               message=f"refused by the station: {exc}")
            self.store.save(record)
            self._note(make_snapshot(job_id=job.job_id, station_id=self.station_id, state=JobState.FAILED,
                                     episodes_total=int(job.episodes_total), episodes=(), message=record.message))
            return
        self.get_logger().info(f"job {spec.job_id} from the relay: {spec.episodes_total} episode(s) of "
                               f"{len(spec.tasks)} task(s) for {spec.client_id}")
        with self._lock:
            ahead = len(self._queued) + (1 if self._current is not None else 0)
        self._enqueue(JobRecord(spec))
        if ahead:
            self._note(make_snapshot(job_id=spec.job_id, station_id=self.station_id, state=JobState.CREATED,
                                     episodes_total=spec.episodes_total, episodes=(),
                                     message=f"queued at station {self.station_id} behind {ahead} job(s)"))

    def _on_relay_cancel(self, job_id: str, reason: str) -> None:
        self.cancel(job_id, reason or "cancelled by the client")

    def cancel(self, job_id: str, reason: str) -> tuple:
        with self._lock:
            runner = self._current
            if runner is not None and runner.spec.job_id == job_id:
                reply = runner.cancel(reason)
                return reply.ok, reply.message
            if job_id in self._queued:
                self._cancel_requests[job_id] = reason
                return True, f"job {job_id} cancelled before it started"
            latest = self._latest.get(job_id)
        if latest is None:
            return False, f"unknown job {job_id!r}"
        return False, f"job {job_id} already ended ({latest.state.value})"

    def _work(self) -> None:
        while not self._closing.is_set():
            try:
                record = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if record is None:
                return
            self._run_job(record)

    def _run_job(self, record: JobRecord) -> None:
        operator = ScriptedOperator(name=self.p("operator_name")) if self.p("operator") == "scripted" \
            else ManualOperator()
        runner = None
        try:
            self.robot.begin_job(record.job_id)
            runner = JobRunner(record, self.robot, operator, store=_ClosingStore(self.store, self._closing),
                               publish=self._note, settings=self.settings)
            with self._lock:
                self._queued.pop(record.job_id, None)
                self._current = runner
                cancel = self._cancel_requests.pop(record.job_id, None)
            if cancel is not None:
                runner.cancel(cancel)
            if self._closing.is_set():
                return
            final = runner.run()
            self.get_logger().info(f"job {record.job_id} {final.state.value}: {final.message}")
        except Exception as exc:  # a job that cannot even start must not take the station down, nor vanish
            message = f"the station could not run the job: {type(exc).__name__}: {exc}"
            self.get_logger().error(f"job {record.job_id}: {message}")
            if runner is None and not self._closing.is_set():
                failed = record.replace(state=JobState.FAILED, running=None, message=message)
                try:
                    self.store.save(failed)
                except Exception as save_exc:  # noqa: BLE001  (the snapshot below still tells the client)
                    self.get_logger().error(f"job {record.job_id} could not be persisted: {save_exc}")
                self._note(make_snapshot(job_id=record.job_id, station_id=record.spec.station_id,
                                         state=JobState.FAILED, episodes_total=record.spec.episodes_total,
                                         episodes=record.episodes, message=message))
            with self._lock:
                self._queued.pop(record.job_id, None)
        finally:
            operator.close()
            with self._lock:
                self._current = None

    def _note(self, status: Any, publish_episodes: bool = True) -> None:
        """Keep a new snapshot, publish it (job_status, new episode_results) and report it to the relay."""
        if self._closing.is_set():
            return  # not persisted either (_ClosingStore): the job resumes from its last state after a restart
        with self._lock:
            self._latest[status.job_id] = status
            before = self._published_episodes.get(status.job_id, 0 if publish_episodes else len(status.episodes))
            self._published_episodes[status.job_id] = len(status.episodes)
        try:
            self._status_pub.publish(convert.station_status_to_msg(status))
            for episode in status.episodes[before:]:
                self._results_pub.publish(convert.station_episode_to_msg(episode))
        except Exception as exc:  # the context is going away; the store and the relay still get it
            self.get_logger().warning(f"job_status not published: {exc}")
        if self.link is not None:
            self.link.report(status)

    def status_of(self, job_id: str) -> Any:
        with self._lock:
            return self._latest.get(job_id)

    @property
    def current(self) -> Optional[JobRunner]:
        with self._lock:
            return self._current

    # -- services --------------------------------------------------------------------------------------------
    def _on_submit(self, request: Any, response: Any) -> Any:
        import json
        import secrets

        job_id = "job-" + secrets.token_hex(8)
        try:
            config = json.loads(request.policy_config_json) if request.policy_config_json else {}
            if not isinstance(config, dict):
                raise JobSpecError("policy_config_json", "must be a JSON object")
            tasks = []
            for index, task in enumerate(request.tasks):
                try:
                    tasks.append(convert.station_task_from_msg(task))
                except ValueError as exc:
                    raise JobSpecError("scoring", str(exc), index) from None
            spec = validate_job_spec(JobSpec(
                job_id=job_id, client_id=request.client_id or "ros", station_id=self.station_id, tasks=tuple(tasks),
                episodes_total=int(request.episodes_total), policy_provider=request.policy_provider or "mock",
                policy_config=config))
        except (JobSpecError, ValueError) as exc:
            response.accepted, response.job_id, response.message = False, "", str(exc)
            return response
        self._enqueue(JobRecord(spec))
        response.accepted, response.job_id, response.message = True, job_id, f"job {job_id} queued"
        return response

    def _on_cancel(self, request: Any, response: Any) -> Any:
        response.ok, response.message = self.cancel(request.job_id, request.reason)
        return response

    def _on_get_status(self, request: Any, response: Any) -> Any:
        status = self.status_of(request.job_id)
        response.found = status is not None
        if status is not None:
            response.status = convert.station_status_to_msg(status)
        return response

    def _console(self) -> Any:
        runner = self.current
        return None if runner is None else runner.console

    def _on_takeover(self, request: Any, response: Any) -> Any:
        return self._operator_call(response, lambda c: c.takeover(request.operator_name, request.reason))

    def _on_resume(self, request: Any, response: Any) -> Any:
        return self._operator_call(response, lambda c: c.resume(request.operator_name))

    def _on_discard(self, request: Any, response: Any) -> Any:
        return self._operator_call(response, lambda c: c.discard(request.episode_id))

    def _on_score_sheet(self, request: Any, response: Any) -> Any:
        return self._operator_call(response, lambda c: c.submit_score_sheet(
            request.episode_id, convert.station_answers_from_msg(request.answers)))

    def _operator_call(self, response: Any, action: Any) -> Any:
        """Run one operator action on the running job's console; its reply (or why none) is the answer."""
        console = self._console()
        if console is None:
            response.ok, response.message = False, "no job is running"
        else:
            reply = action(console)
            response.ok, response.message = reply.ok, reply.message
        return response

    # -- lifetime --------------------------------------------------------------------------------------------
    def close(self, timeout_s: float = 5.0) -> None:
        """Stop taking jobs and stop the running one's rollout.

        Its state stays persisted as it was before, so a restarted station resumes it.
        """
        self._closing.set()
        self._queue.put(None)
        runner = self.current
        if runner is not None:
            runner.suspend("station shutting down")  # stops the rollout; the job stays as persisted
        if self.link is not None:
            self.link.close(flush_timeout_s=1.0)
        self.robot.close()


def _read_token(path: str) -> str:
    if not path:
        raise ValueError("relay_target is set but neither station_token nor station_token_file is")
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as exc:
        raise ValueError(f"station_token_file {path!r}: {exc}") from None
    if not token:
        raise ValueError(f"station_token_file {path!r} is empty")
    return token


def _placeholder_spec(job: Any, station_id: str) -> JobSpec:
    """Return a spec to persist a refused relay job under (its tasks did not validate)."""
    from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet, Task

    sheet = ScoringSheet((ScoringItemDefinition("refused", "refused", AnswerType.YES_NO, 1.0,
                                                success_answer="yes"),))
    return JobSpec(job_id=job.job_id, client_id=job.client_id or "relay", station_id=station_id,
                   tasks=(Task("refused", "refused", "", {}, sheet),), episodes_total=max(1, int(job.episodes_total)),
                   policy_provider="relay")


def main(argv: "list[str] | None" = None) -> int:
    """Run the station until SIGINT/SIGTERM; 0 on a clean stop, 2 on invalid parameters."""
    signals = StopSignals.install()
    init_without_signal_handlers(argv if argv is not None else sys.argv)
    node = None
    executor = MultiThreadedExecutor(num_threads=4)
    spinner = None
    code = 0
    try:
        node = StationNode()
        executor.add_node(node)
        spinner = spin_in_background(executor, "station-executor")
        while not signals.event.wait(0.1):
            if process.executor_died(spinner) is not None:
                node.get_logger().error("the executor died; stopping")
                code = process.EXIT_EXECUTOR_DIED
                break
    except (KeyboardInterrupt, ExternalShutdownException):
        code = 0
    except ValueError as exc:
        print(f"station_node: {exc}", file=sys.stderr, flush=True)
        code = process.EXIT_BAD_PARAMETERS
    finally:
        if node is not None:
            node.close()
        executor.shutdown()
        if spinner is not None:
            spinner.join(2.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        signals.restore()
    return code


if __name__ == "__main__":
    sys.exit(main())
