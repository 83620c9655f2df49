"""station_node: evaluation jobs on the arms — a thin rclpy shell over the station core, ``station.Station``.

Every job rule (submit, queue order, cancel, recovery, a relay's job matched by id) lives once, in
:class:`~strands_robots.station.station.Station`; this node adapts ROS services, topics and the relay link onto it.
Jobs come from the relay (the read-only ``relay_credentials_file`` names the station's credentials file, read once
at start: the relay's address, the station's token, its CA; no parameter holds a token) — the station connects out,
takes the jobs addressed to ``station_id``, reports every snapshot of them plus a heartbeat, keeps a backlog while
the relay is away — or from the ``submit_job`` service, and run one at a time on the core's job thread (node
callbacks never wait for an episode) over :class:`~strands_robots.nodes.station.robot_port.RosRobotPort` (the arm
driver's lease and start pose, the rollout node's ``run_episode`` action and takeover services) and an operator
(``operator: scripted`` — the :class:`~strands_robots.station.scripted_operator.ScriptedOperator` of a simulated
station, driven by task parameters — or ``manual``: the operator services below, a person's answers).

Services: ``submit_job`` (SubmitJob: answered once the job is persisted; from then on it is visible, CREATED
with its place in the queue, and cancellable), ``cancel_job`` (CancelJob), ``get_status`` (GetStatus);
operator: ``takeover`` (Takeover), ``resume`` (Resume: only by the operator who took over, or one of
``supervisors``), ``discard`` (Discard), ``submit_score_sheet`` (SubmitScoreSheet), ``clear_safety_stop``
(ClearSafetyStop: an operator clears the safety stop the next episode waits on; the station never clears one by
itself). Topics: ``job_status`` (JobStatus, transient local: a late subscriber gets the latest
snapshot), ``~/episode_results`` (EpisodeResult, each finished episode of a job once, with its id and sheet; a
private name because the rollout node's ``episode_results`` in the same namespace carries every rollout) and
``/diagnostics`` (the station's jobs; an error naming every job file set aside at start).

Restart safety: every job's state is persisted under ``state_dir`` (``station.persistence.JobStore``; empty: the
directory of this station and the relay its credentials name, or of its ``submit_job`` jobs when it has none,
``station/state_dir.py``: jobs are resumed only by the same station against the same relay) before
each snapshot is published. A restarted station reloads every readable job and resumes the ones that had not
ended (``persistence.recover``); a job whose files do not load is moved aside and FAILED with the reason
(reported to the relay too); jobs that had ended are re-reported so the relay has their final snapshot.
A relay job's recording is pending on disk (``station.pending_uploads``, ``<state_dir>/uploads``) from the
moment the rollout names it, before its episode is persisted, until the relay holds it
(``station.recording_sender``); one given up while the relay is away is queued again every 30 s, and a restarted
station sends every pending one whose episode it holds as finished again.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import sys
import threading
import time
from typing import Any, Dict

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from diagnostic_msgs.msg import DiagnosticArray
from strands_robots_msgs.msg import EpisodeResult, JobStatus
from strands_robots_msgs.srv import (ClearSafetyStop, CancelJob, Discard, GetStatus, Resume, SubmitJob,
                                     SubmitScoreSheet, Takeover)

from strands_robots.conversions.driver import driver_diagnostics_to_msg
from strands_robots.conversions.station import (station_answers_from_msg, station_episode_to_msg,
                                                station_status_to_msg, station_task_from_msg)
from strands_robots.wire import pb_model
from strands_robots.ros import process
from strands_robots.ros.realtime_priority import decide_realtime
from strands_robots.ros.qos import DIAGNOSTICS_QOS, EVENT_QOS, LATCHED_QOS
from strands_robots.nodes.station.policy import RelaySettings
from strands_robots.nodes.station.robot_port import RosRobotPort
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.job import JobSpec, JobSpecError
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.pending_uploads import PendingUploads
from strands_robots.station.persistence import JobStore
from strands_robots.station.recording_sender import RecordingSender
from strands_robots.station.state_dir import station_state_dir
from strands_robots.station.suite_file import load_suites
from strands_robots.station.suite_job import station_offer
from strands_robots.package_files import config_dir
from strands_robots.station.station import Station

__all__ = ["StationNode", "ManualOperator", "main", "PARAMETERS"]

_DIAGNOSTICS_PERIOD_S = 1.0
_RECORDING_RETRY_S = 30.0  # an upload given up while the relay was away is queued again this often
READ_ONLY = frozenset({"relay_credentials_file"})  # start-time configuration: a running node never rereads it

PARAMETERS = {
    "station_id": ("sim_station", "this station's id (jobs addressed to it; the relay token's station)"),
    "relay_credentials_file": ("", "the station's relay credentials file (0600; wire/credentials.py: the relay, "
                                   "this station's id and token, its CA), read once at start; read-only; empty: "
                                   "no relay (jobs only from submit_job)"),
    "state_dir": ("", "where job state is persisted (one JSON file per job); empty: one directory per station and "
                      "relay, $XDG_STATE_HOME/strands_robots/<station_id>/<relay> (station/state_dir.py)"),
    "driver_namespace": ("", "the arm driver's namespace; empty: this node's"),
    "rollout_namespace": ("", "the rollout node's namespace; empty: this node's"),
    "robot_name": ("sim_arms", "robot name in the rollout's RunPolicyStarted"),
    "profile": ("hardware", "hardware (a person scores and clears stops: never the scripted operator, no operator or "
                            "fault settings in its suites) or simulated (the scripted operator may score, faults may "
                            "be injected)"),
    "suites_dir": ("", "this station's suites, one YAML file each (station/suite_file.py), read once at start; "
                       "empty: the package's config/suites"),
    "allow_free_form_tasks": (False, "run a team's own tasks (scored only by the station's operator; the scripted "
                                     "operator keeps them unscored)"),
    "operator": ("", "scripted (a simulated station's stand-in, driven by its suites) or manual (services); empty: "
                     "scripted on a simulated station, manual on a hardware one"),
    "operator_name": ("station-operator", "the name the scripted operator acts (and clears safety stops) under"),
    "lease_holder": ("", "the holder name of the rollout's lease; empty: station:<station_id>"),
    "lease_wait_s": (120.0, "how long an episode waits for arms another holder has; then the job FAILs"),
    "driver_ready_timeout_s": (10.0, "how long an episode waits for the arm driver to be ready; then a station fault"),
    "supervisors": ("", "comma-separated operator names that may resume another operator's takeover"),
    "lease_priority": (10, "the rollout's lease priority (an operator claims above it)"),
    "lease_duration_s": (1.0, "lease length; renewed every third of it while the episode runs"),
    "action_horizon": (8, "longest action chunk the rollout applies"),
    "async_rtc": (False, "prefetch the next chunk while one plays (hides a remote policy's round trip)"),
    "rtc_inference_timeout_s": (0.0, "async inference deadline; 0 uses the rollout node's"),
    "scoring_timeout_s": (0.0, "keep an episode unscored when no sheet comes within this; 0: wait"),
    "policy_attach_timeout_s": (600.0, "how long a job waits for its policy client each time it waits (in the "
                                       "queue too); past it the job FAILs with that reason"),
    "policy_turn_s": (10.0, "how long a job waiting for its policy holds the station while another team's job is "
                            "queued; then it steps aside, keeping its place and its deadline"),
    "max_infrastructure_retries": (3, "times one task's episode runs again after the station's own fault ended it "
                                      "(driver, rollout node or relay link died; policy silent); then the job FAILs"),
    "attach_timeout_s": (10.0, "relay provider: how long an episode waits for the policy client"),
    "reply_timeout_s": (10.0, "relay provider: how long each policy call waits for its answer"),
    "heartbeat_s": (2.0, "relay heartbeat period when nothing changes"),
    "record": (False, "record every rollout to MCAP (in the rollout node's recording_dir), not only those of jobs "
                      "that ask (record: true)"),
    "team_recordings": (True, "record the episodes of a job that asks (record: true) and send a relay job's "
                              "recordings to its team; false: a job asking is refused at submit, and no recording "
                              "is sent to a team"),
    "arms_file": ("", "the arm driver's config (arms.yaml: actuators and command ranges) the compatibility gate and "
                      "the provenance use; empty: the package's config/arms.yaml"),
    "cameras_file": ("", "the camera file (cameras.yaml: names and image sizes); empty: the package's"),
    "cameras": ("", "comma-separated cameras the rollouts observe (as the rollout node's cameras); empty: none"),
    "camera_namespace": ("", "namespace of the camera node's topics (the preflight takes a frame of each camera); "
                             "empty: this node's"),
}


def station_profile(profile: str, operator: str) -> "tuple[str, str]":
    """Return ``(profile, operator)``: the operator a station of ``profile`` runs (empty: its profile's own).

    :raises ValueError: one line: an unknown profile or operator, or a hardware station asked for the scripted one.
    """
    if profile not in ("hardware", "simulated"):
        raise ValueError(f"profile must be hardware or simulated, got {profile!r}")
    if operator not in ("scripted", "manual", ""):
        raise ValueError(f"operator must be scripted or manual, got {operator!r}")
    if profile == "hardware" and operator == "scripted":
        raise ValueError("operator: scripted refused: a hardware station never runs the scripted operator (a person "
                         "scores and clears stops); set profile: simulated for a simulated station")
    return profile, operator or ("scripted" if profile == "simulated" else "manual")


def submitted_job_spec(request: Any, *, job_id: str, station_id: str, suites: Any, profile: str,
                       allow_free_form_tasks: bool) -> JobSpec:
    """Return the JobSpec of a ``SubmitJob`` request, by the rules a relay job keeps (``job_model``, the suites).

    :raises JobSpecError: naming the request's field (``suite_trials``, ``choose.<key>``, ``tasks[i]...``).
    """
    from strands_robots.job_model.team_job import TeamJobRefused, team_job_from_mapping
    from strands_robots.station.suite_job import free_form_job_spec, job_spec_for

    config = json.loads(request.policy_config_json) if request.policy_config_json else {}
    if not isinstance(config, dict):
        raise JobSpecError("policy_config_json", "must be a JSON object")
    tasks = []
    for index, task in enumerate(request.tasks):
        try:
            tasks.append(station_task_from_msg(task))
        except ValueError as exc:
            raise JobSpecError("scoring", str(exc), index) from None
    fields = dict(job_id=job_id, client_id=request.client_id or "ros", station_id=station_id,
                  policy_provider=request.policy_provider or "mock", policy_config=config)
    options = {"max_discards": int(request.max_discards)} if request.has_max_discards else {}
    if request.record:  # the job asks for its episodes' recordings: Station.submit refuses it without team_recordings
        options["record"] = True
    if not request.suite:
        if request.suite_tasks or request.suite_trials or request.choose:
            raise JobSpecError("suite", "suite_tasks, suite_trials and choose name a suite's tasks: say which suite")
        return free_form_job_spec(tasks, episodes_total=int(request.episodes_total),
                                  allow_free_form_tasks=allow_free_form_tasks, **fields, **options)
    if len(request.suite_tasks) != len(request.suite_trials):
        raise JobSpecError("suite_trials", f"has {len(request.suite_trials)} entries; suite_tasks has "
                                           f"{len(request.suite_tasks)} (one trial count per task)")
    try:
        team = team_job_from_mapping({
            "station_id": station_id, "suite": request.suite,
            "tasks": [{"task": t, "trials": int(n)} for t, n in zip(request.suite_tasks, request.suite_trials)],
            "choose": {kv.key: kv.value for kv in request.choose}, **options})
    except TeamJobRefused as exc:
        raise JobSpecError(exc.field, exc.reason) from None
    spec = job_spec_for(team, suites, profile=profile, allow_free_form_tasks=allow_free_form_tasks,
                        free_form_tasks=tasks, **fields)
    if spec.episodes_total != int(request.episodes_total):
        raise JobSpecError("episodes_total", f"{request.episodes_total} refused: the suite tasks' trials and the "
                                             f"job's own tasks make {spec.episodes_total} episode(s)")
    return spec


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


class StationNode(Node):
    """The station (see the module docstring): ROS services and topics over one :class:`Station` core."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("station", **kwargs)
        for name, (default, description) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=description,
                                                                      read_only=name in READ_ONLY))
        self.station_id = self.p("station_id")
        if not self.station_id:
            raise ValueError("station_id must be a non-empty string")
        self.profile, self.operator_kind = station_profile(self.p("profile"), self.p("operator"))
        self.allow_free_form_tasks = bool(self.p("allow_free_form_tasks"))
        self.team_recordings = bool(self.p("team_recordings"))
        # the station's exam, read once at start: a suite refused (naming file, task and key) is not offered
        self.refused_suites: list = []
        self.suites = load_suites(self.p("suites_dir") or config_dir("suites"), self.profile,
                                  on_refused=self._suite_refused)
        self.get_logger().info(f"station {self.station_id} ({self.profile}, {self.operator_kind} operator) offers "
                               f"suite(s): {', '.join(sorted(self.suites)) or 'none'}"
                               f"{'; free-form tasks allowed' if self.allow_free_form_tasks else ''}")
        self._group = ReentrantCallbackGroup()
        self._status_pub = self.create_publisher(JobStatus, "job_status", LATCHED_QOS)
        # Private name (<ns>/station/episode_results): the rollout node's own episode_results in the same namespace
        # carries every rollout, this one the job's finished episodes with their ids and sheets.
        self._results_pub = self.create_publisher(EpisodeResult, "~/episode_results", EVENT_QOS)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS)
        # Read before the state: a station's jobs belong to the relay that handed them out (station/state_dir.py).
        credentials = None
        if self.p("relay_credentials_file"):
            # The relay and this station's token: start-time configuration, read once from a private file.
            from strands_robots.wire.credentials import load_relay_credentials

            credentials = load_relay_credentials(self.p("relay_credentials_file"))
            if credentials.station_id != self.station_id:
                raise ValueError(f"relay_credentials_file {self.p('relay_credentials_file')!r} is for station "
                                 f"{credentials.station_id!r}; this node's station_id is {self.station_id!r}")
        self.state_dir = self.p("state_dir") or station_state_dir(
            self.station_id, credentials.targets if credentials is not None else None)
        self.store = JobStore(self.state_dir)
        self._lock = threading.Lock()
        self._published_episodes: Dict[str, int] = {}
        self._closing = threading.Event()
        self._worker = _OperatorWorker(self.get_logger().error)  # operator actions' robot calls, off callbacks

        self.link = None
        relay = None
        target = ""
        if credentials is not None:
            from strands_robots.station_link.link import StationLink

            target = ",".join(credentials.targets)  # a relay cluster: the link fails over between them
            from strands_robots.station_link.slot_seal import seal_key

            relay = RelaySettings(target, self.station_id, "", "", self.p("attach_timeout_s"),
                                  self.p("reply_timeout_s"), seal_key=seal_key(credentials.token))
            offer = station_offer(self.station_id, self.suites, self.profile, self.allow_free_form_tasks,
                                  team_recordings=self.team_recordings)
            self.link = StationLink(target, self.station_id, credentials.token, on_job=self._on_relay_job,
                                    on_cancel=self._on_relay_cancel, heartbeat_s=self.p("heartbeat_s"),
                                    root_certificates=credentials.root_certificates,
                                    offer=pb_model.station_offer_to_pb(offer))
        # a relay job's recordings stay pending on disk until the relay holds them (resent after a restart); a
        # station whose config keeps its recordings sends none
        self.recordings = None if self.link is None or not self.team_recordings else RecordingSender(
            PendingUploads(os.path.join(self.state_dir, "uploads")), self.link, self._episodes_of,
            info=self.get_logger().info, warning=self.get_logger().warning, error=self.get_logger().error)
        facts = self._station_facts()
        self.robot = RosRobotPort(self, driver_namespace=self.p("driver_namespace"),
                                  rollout_namespace=self.p("rollout_namespace"), robot_name=self.p("robot_name"),
                                  relay=relay, link=self.link, action_horizon=self.p("action_horizon"),
                                  operator_name=self.p("operator_name"), async_rtc=self.p("async_rtc"),
                                  rtc_inference_timeout_s=self.p("rtc_inference_timeout_s"), record=self.p("record"),
                                  driver_ready_timeout_s=self.p("driver_ready_timeout_s"),
                                  on_recording=self._keep_recording, camera_set=facts.camera_set,
                                  camera_namespace=self.p("camera_namespace"))
        timeout = self.p("scoring_timeout_s")
        self.settings = ProcedureSettings(lease_holder=self.p("lease_holder"), lease_priority=self.p("lease_priority"),
                                          lease_duration_s=self.p("lease_duration_s"),
                                          lease_wait_s=self.p("lease_wait_s"),
                                          supervisors=tuple(n.strip() for n in self.p("supervisors").split(",")
                                                            if n.strip()),
                                          scoring_timeout_s=timeout if timeout > 0 else None,
                                          policy_attach_timeout_s=self.p("policy_attach_timeout_s"),
                                          policy_turn_s=self.p("policy_turn_s"),
                                          max_infrastructure_retries=self.p("max_infrastructure_retries"),
                                          team_recordings=self.team_recordings, station_facts=facts)
        operator = ScriptedOperator(name=self.p("operator_name")) if self.operator_kind == "scripted" \
            else ManualOperator()
        self.station = Station(self.station_id, self.robot, operator, store=self.store, publish=self._note,
                               settings=self.settings, prepare_job=self.robot.begin_job)
        g = self._group
        self.create_service(SubmitJob, "submit_job", self._on_submit, callback_group=g)
        self.create_service(CancelJob, "cancel_job", self._on_cancel, callback_group=g)
        self.create_service(GetStatus, "get_status", self._on_get_status, callback_group=g)
        self.create_service(Takeover, "takeover", self._on_takeover, callback_group=g)
        self.create_service(Resume, "resume", self._on_resume, callback_group=g)
        self.create_service(Discard, "discard", self._on_discard, callback_group=g)
        self.create_service(ClearSafetyStop, "clear_safety_stop", self._on_clear_safety_stop, callback_group=g)
        self.create_service(SubmitScoreSheet, "submit_score_sheet", self._on_score_sheet, callback_group=g)

        for line in self.station.recover():
            self.get_logger().warning(f"after a restart: job {line}")
        for bad in self.station.set_aside:
            self.get_logger().error(f"job {bad.job_id}: its saved state does not load ({bad.reason}); kept aside as "
                                    f"{', '.join(bad.moved_to) or 'nothing moved'}, the job is FAILED")
        self._publish_diagnostics()
        self.create_timer(_DIAGNOSTICS_PERIOD_S, self._publish_diagnostics, callback_group=g)
        if self.link is not None:
            self.link.start()
        if self.recordings is not None:
            self.recordings.resend_pending()
            self.create_timer(_RECORDING_RETRY_S, self.recordings.retry_given_up, callback_group=g)
        self.station.start()
        self.get_logger().info(f"station {self.station_id} ready (relay {target or 'none'}, operator "
                               f"{self.p('operator')}, state in {self.state_dir})")

    def _station_facts(self) -> Any:
        """Read arms.yaml and cameras.yaml once (the gate's station side and the jobs' provenance)."""
        from strands_robots.nodes.arm_driver.params import default_config_path
        from strands_robots.station.provenance import load_station_facts

        cameras = [n.strip() for n in self.p("cameras").split(",") if n.strip()]
        facts = load_station_facts(self.p("arms_file") or default_config_path(),
                                   self.p("cameras_file") or None, cameras)
        self.get_logger().info(f"station {self.station_id}: strands_robots {facts.software_version} "
                               f"{facts.git_revision or '(no git revision)'}; "
                               + ", ".join(f"{f.name} {f.sha256[:12]}" for f in facts.files))
        return facts

    def p(self, name: str) -> Any:
        return self.get_parameter(name).value

    # -- what the core publishes -----------------------------------------------------------------------------
    def _note(self, status: Any) -> None:
        """Publish a new snapshot (job_status, its new episode_results) and report it to the relay.

        Called by the core with its lock held: nothing here waits. Episodes a job already had when this process
        first saw it were published by the process before (a restart), so only later ones are.
        """
        if self._closing.is_set():
            return
        with self._lock:
            before = self._published_episodes.get(status.job_id, len(status.episodes))
            self._published_episodes[status.job_id] = max(before, len(status.episodes))
        try:
            self._status_pub.publish(station_status_to_msg(status))
            for episode in status.episodes[before:]:
                self._results_pub.publish(station_episode_to_msg(episode))
        except Exception as exc:  # the context is going away; the store and the relay still get it
            self.get_logger().warning(f"job_status not published: {exc}")
        to_relay = self.link is not None and self._from_relay(status.job_id)
        if to_relay:
            self.link.report(status)
        self._send_recordings(status, before, to_relay)

    def _from_relay(self, job_id: str) -> bool:
        """Whether the relay knows the job (it came from the relay; a submit_job job stays on this domain)."""
        spec = self.station.spec(job_id)
        return spec is None or spec.policy_provider == "relay"

    def _send_recordings(self, status: Any, before: int, to_relay: bool) -> None:
        """Queue each new episode's recording for the job's team (a relay job; the link sends it, never waits)."""
        for episode in status.episodes[before:]:
            path = self.robot.take_recording(episode.run_id) if episode.run_id else ""
            if path and to_relay and self.recordings is not None:
                self.recordings.send(status.job_id, episode.episode_id, episode.run_id, path)

    def _keep_recording(self, job_id: str, plan: Any, run_id: str, path: str, sha256: str) -> None:
        """Job thread, before the episode is persisted: a relay job's recording is pending on disk from now."""
        if self.recordings is not None and plan.policy_provider == "relay":
            self.recordings.keep(job_id, plan.episode_id, run_id, path, sha256)

    def _episodes_of(self, job_id: str) -> Any:
        status = self.station.status(job_id)
        return None if status is None else status.episodes

    def _publish_diagnostics(self) -> None:
        """Say on /diagnostics what the station is doing, and name every job file it had to set aside."""
        aside = self.station.set_aside
        running = self.station.running_job
        values = {"station_id": self.station_id, "running_job": running or "none",
                  "queued_jobs": str(len(self.station.queued()))}
        for bad in aside:
            values[f"set_aside.{bad.job_id}"] = f"{bad.reason} -> {', '.join(bad.moved_to) or 'nothing moved'}"
        if aside:
            level = "error"
            message = (f"{len(aside)} job file(s) unreadable at start, kept aside and their jobs FAILED: "
                       + ", ".join(bad.job_id for bad in aside))
        else:
            level, message = "ok", f"running {running}" if running else "idle"
        try:
            self._diagnostics_pub.publish(driver_diagnostics_to_msg(
                f"{self.get_name()}: jobs", self.station_id, level, message, values, time.time_ns()))
        except Exception as exc:  # noqa: BLE001  (the context is going away)
            self.get_logger().debug(f"/diagnostics not published: {exc}")

    # -- relay -----------------------------------------------------------------------------------------------
    def _on_relay_job(self, job: Any) -> None:
        """Link thread: a job from the relay, handed to the core (a job it holds is matched by id)."""
        try:
            # the relay's job as it came (its tasks and every setting the job carries), by the relay's conversion
            spec = pb_model.job_spec_from_pb(job, suites=self.suites, profile=self.profile,
                                             allow_free_form_tasks=self.allow_free_form_tasks)
        except (JobSpecError, ValueError) as exc:
            if self.station.refuse(job.job_id, job.client_id or "relay", int(job.episodes_total), str(exc)):
                self.get_logger().error(f"job {job.job_id} from the relay refused: {exc}")
            return
        reply = self.station.take(spec)
        line = (f"job {spec.job_id} from the relay ({spec.episodes_total} episode(s) of {len(spec.tasks)} task(s) "
                f"for {spec.client_id}): {reply.message}")
        if reply.accepted:
            self.get_logger().info(line)
            return
        # rclpy refuses one call site logging at two severities: each severity has its own call
        self.get_logger().error(line)
        # the team learns why from the job's FAILED status, not from this log alone
        self.station.refuse(job.job_id, job.client_id or "relay", int(job.episodes_total), reply.message)

    def _on_relay_cancel(self, job_id: str, reason: str) -> None:
        reply = self.station.cancel(job_id, reason or "cancelled by the client")
        self.get_logger().info(f"relay cancel of {job_id}: {reply.message}")

    def _suite_refused(self, exc: Exception) -> None:
        self.refused_suites.append(str(exc))
        self.get_logger().error(f"suite not offered: {exc}")

    # -- services --------------------------------------------------------------------------------------------
    def _on_submit(self, request: Any, response: Any) -> Any:
        job_id = "job-" + secrets.token_hex(8)
        try:
            spec = submitted_job_spec(request, job_id=job_id, station_id=self.station_id, suites=self.suites,
                                      profile=self.profile, allow_free_form_tasks=self.allow_free_form_tasks)
        except (JobSpecError, ValueError) as exc:
            response.accepted, response.job_id, response.message = False, "", str(exc)
            return response
        reply = self.station.submit(spec)  # answers once the job is persisted
        response.accepted, response.job_id, response.message = reply.accepted, \
            (reply.job_id if reply.accepted else ""), reply.message
        return response

    def _on_cancel(self, request: Any, response: Any) -> Any:
        reply = self.station.cancel(request.job_id, request.reason)
        response.ok, response.message = reply.ok, reply.message
        return response

    def _on_get_status(self, request: Any, response: Any) -> Any:
        status = self.station.status(request.job_id)
        response.found = status is not None
        if status is not None:
            response.status = station_status_to_msg(status)
        return response

    def _on_takeover(self, request: Any, response: Any) -> Any:
        """Check the takeover and answer at once; the rollout is paused on the operator worker (never here)."""
        return self._operator_call(response, lambda c: c.takeover(request.operator_name, request.reason,
                                                                  hand_off=self._worker.submit))

    def _on_resume(self, request: Any, response: Any) -> Any:
        """Check the resume and answer at once; the rollout is resumed on the operator worker (never here)."""
        return self._operator_call(response, lambda c: c.resume(request.operator_name, hand_off=self._worker.submit))

    def _on_discard(self, request: Any, response: Any) -> Any:
        return self._operator_call(response, lambda c: c.discard(request.episode_id))

    def _on_score_sheet(self, request: Any, response: Any) -> Any:
        return self._operator_call(response, lambda c: c.submit_score_sheet(
            request.episode_id, station_answers_from_msg(request.answers)))

    def _on_clear_safety_stop(self, request: Any, response: Any) -> Any:
        """Hand an operator's clear to the waiting episode and answer at once (the job thread relays it)."""
        self._operator_call(response, lambda c: c.clear_safety_stop(request.operator_name))
        self.get_logger().warning(f"[operator] clear_safety_stop by {request.operator_name or 'nobody'}: "
                                  f"{'accepted' if response.ok else 'refused'}: {response.message}")
        return response

    def _operator_call(self, response: Any, action: Any) -> Any:
        """Run one operator action on the running job's console; its reply (or why none) is the answer."""
        console, why = self.station.operator()
        if console is None:
            response.ok, response.message = False, why
        else:
            reply = action(console)
            response.ok, response.message = reply.ok, reply.message
        return response

    # -- lifetime --------------------------------------------------------------------------------------------
    def close(self, timeout_s: float = 5.0) -> None:
        """Stop taking jobs and stop the running one's rollout.

        Its state stays persisted as it was before, so a restarted station resumes it.
        """
        self.robot.begin_closing()  # the job thread's waits on the rollout node and driver end within a second
        self.station.stop(timeout_s=timeout_s)  # suspends the running job: nothing more is persisted for it
        self._closing.set()
        self._worker.close()
        if self.recordings is not None:
            self.recordings.close()
        if self.link is not None:
            self.link.close(flush_timeout_s=1.0)

    def destroy_node(self) -> None:
        """Destroy the robot port's clients, then the node.

        Not in :meth:`close`, which runs while the executor still spins: an action client destroyed under a
        spinning executor ends its spin with a traceback ("action client pointer is invalid"). Once: the
        context's shutdown destroys its nodes again (a node whose __init__ raised has no robot port).
        """
        robot = getattr(self, "robot", None)
        if robot is not None and not getattr(self, "_robot_closed", False):
            self._robot_closed = True
            robot.close()
        super().destroy_node()


class _OperatorWorker:
    """One thread running the operator actions' robot calls (pause, resume) handed off by service callbacks.

    A callback checks the action, hands the slow part here and answers; the outcome becomes the job's message.
    At most ``depth`` wait; past that :meth:`submit` raises (the action is refused with the reason).
    """

    def __init__(self, log: Any, depth: int = 8) -> None:
        self._log = log
        self._jobs: "queue.Queue[Any]" = queue.Queue(maxsize=depth)
        self._thread = threading.Thread(target=self._run, name="station-operator", daemon=True)
        self._thread.start()

    def submit(self, work: Any) -> None:
        try:
            self._jobs.put_nowait(work)
        except queue.Full:
            raise RuntimeError(f"{self._jobs.maxsize} operator actions already wait for the rollout node") from None

    def _run(self) -> None:
        while True:
            work = self._jobs.get()
            if work is None:
                return
            try:
                work()
            except Exception as exc:  # noqa: BLE001  (the console reports its own outcomes; never stop the worker)
                self._log(f"operator action failed: {type(exc).__name__}: {exc}")

    def close(self, timeout_s: float = 2.0) -> None:
        try:
            self._jobs.put(None, timeout=timeout_s)
        except queue.Full:
            return
        self._thread.join(timeout_s)


def main(argv: "list[str] | None" = None) -> int:
    """Run the station until SIGINT/SIGTERM; 0 on a clean stop, 2 on invalid parameters."""
    try:  # first, decided (taken once the node is built: ros/realtime_priority.py)
        realtime = decide_realtime()
    except ValueError as exc:
        print(f"station_node: {exc}", file=sys.stderr, flush=True)
        return process.EXIT_BAD_PARAMETERS
    node_process = process.NodeProcess(argv if argv is not None else sys.argv, realtime)
    node = None
    code = 0
    try:
        node = StationNode()
        node_process.adopt(node=node)
        # The station holds the arms' lease while an episode runs: its renewals are on the control path, so the
        # process is scheduled as the driver and the rollout node are. Time-shared beside them (and the cameras'
        # real-time rendering) on a loaded 2-core machine it went more than a lease length without running.
        # No callback waits (robot calls wait on the job and operator threads): a SingleThreadedExecutor.
        spinner = node_process.run(node, SingleThreadedExecutor(), "station-executor")
        node.get_logger().info("executor: single")
        while not node_process.stop.wait(0.1):
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
        node_process.close(spin_timeout_s=2.0)
    return code


if __name__ == "__main__":
    sys.exit(main())
