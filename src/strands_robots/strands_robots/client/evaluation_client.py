"""The Evaluation Client: submit a job to a station through the relay, poll it, cancel it, serve its policy.

    from strands_robots.client import EvaluationClient, Policy, EndEpisode, pb
    client = EvaluationClient("127.0.0.1:50051", token="...")      # TLS: root_certificates=PEM bytes or path
    job_id = client.submit_job(station_id="sim_station", tasks=[...], episodes=3)  # retried: still one job
    status = client.get_status(job_id)                               # pb.JobStatus
    client.cancel(job_id)
    final = client.serve_policy(job_id, MyPolicy())                  # runs until the job ends

Only grpc and protobuf are needed (no ROS, no other part of strands_robots). Every call carries the token;
failures raise the typed errors of :mod:`strands_robots.client.errors` with the relay's reason.
"""

from __future__ import annotations

import logging
import queue
import secrets
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import grpc
from google.protobuf import json_format

from strands_robots.client import codec, errors, pb
from strands_robots.client.credential_files import read_trusted_file
from strands_robots.client.malloc_tuning import keep_freed_buffers
from strands_robots.client.policy import EndEpisode, Policy
from strands_robots.client.policy_spec import spec_of, spec_to_pb
from strands_robots.client.relay_targets import channel_target
from strands_robots.wire.proto import evaluation_service_pb2_grpc as _svc

_log = logging.getLogger("strands_robots.client")

#: Largest message either way (observations with images can be large); the relay has its own limit.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_RETRY_FIRST_S = 1.0
_RETRY_LONGEST_S = 8.0

_ANSWER_TYPE_NAMES = {"yes_no": "ANSWER_TYPE_YES_NO", "count": "ANSWER_TYPE_COUNT", "choice": "ANSWER_TYPE_CHOICE"}
_CLOSE = object()

TaskLike = Union[Any, Mapping[str, Any]]


def new_job_id() -> str:
    """Return a fresh job id, ``job-`` and 16 random hex digits (the relay's own form)."""
    return f"job-{secrets.token_hex(8)}"


def task_from_dict(data: Mapping[str, Any], index: int = 0) -> Any:
    """Build a ``pb.Task`` from a plain mapping (``answer_type``: ``"yes_no"``, ``"ANSWER_TYPE_YES_NO"`` or int).

    :raises errors.InvalidTask: naming ``tasks[index]`` and what is wrong.
    """
    if not isinstance(data, Mapping):
        raise errors.InvalidTask(f"tasks[{index}]: a task is a pb.Task or a mapping, got {type(data).__name__}")
    data = dict(data)
    scoring = data.get("scoring")
    if isinstance(scoring, (list, tuple)):
        scoring = {"items": list(scoring)}
    if isinstance(scoring, Mapping):
        items = []
        for item in scoring.get("items", ()):
            if isinstance(item, Mapping):
                item = dict(item)
                at = item.get("answer_type")
                if isinstance(at, str) and at in _ANSWER_TYPE_NAMES:
                    item["answer_type"] = _ANSWER_TYPE_NAMES[at]
                elif hasattr(at, "value") and at.value in _ANSWER_TYPE_NAMES:  # station.model.AnswerType
                    item["answer_type"] = _ANSWER_TYPE_NAMES[at.value]
            items.append(item)
        data["scoring"] = {**scoring, "items": items}
    if "parameters" in data and isinstance(data["parameters"], Mapping):
        data["parameters"] = {str(k): v for k, v in data["parameters"].items()}
    try:
        return json_format.ParseDict(data, pb.Task())
    except json_format.ParseError as exc:
        raise errors.InvalidTask(f"tasks[{index}]: {exc}") from None


class EvaluationClient:
    """A connection to the relay for one client token.

    :param target: ``host:port`` of the relay, or several (a list, or one string separated by commas): the
        relays of a cluster; calls go to the first that answers, and to the next when it dies.
    :param token: this client's bearer token (from the relay's token file).
    :param root_certificates: PEM bytes, or a path to a PEM file, to use TLS; None for a plain channel. A path is
        read by :func:`~strands_robots.client.credential_files.read_trusted_file` (a regular file of at most 4 MiB,
        yours or root's, that nobody else may write): else ``CredentialFileError`` naming the file and the rule.
    :param timeout_s: deadline of each unary call, in seconds.
    :param max_message_bytes: the largest message sent or received (the relay's own bound is the same by default).
    :param options: further gRPC channel options, ``(name, value)`` pairs, after this client's own.
    :raises ValueError: an empty token.
    """

    def __init__(self, target: "str | Sequence[str]", token: str, *,
                 root_certificates: "bytes | str | Path | None" = None, timeout_s: float = 30.0,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, options: Sequence = ()) -> None:
        if not token:
            raise ValueError("EvaluationClient needs a token")
        opts = [("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.keepalive_time_ms", 20000), *options]
        channel_to, extra = channel_target(target)  # several relays: fail over between them
        opts += extra
        if root_certificates is not None:
            if isinstance(root_certificates, (str, Path)):  # yours or root's, others may not write it, bounded
                root_certificates = read_trusted_file(root_certificates, "root_certificates")
            creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(channel_to, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(channel_to, options=opts)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._stub = _svc.EvaluationStub(self._channel)
        self.timeout_s = timeout_s
        self.target = target if isinstance(target, str) else ",".join(target)

    # -- unary calls --------------------------------------------------------------------------------------------
    def _call(self, method: Callable, request: Any, timeout_s: Optional[float] = None) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc) from None

    def list_suites(self, station_id: Optional[str] = None) -> list:
        """Return what each station offers (``pb.StationSuites``: ``station_id``, ``offer``, ``offered_unix_ms``).

        ``offer`` holds the station's ``profile``, ``allow_free_form_tasks`` and ``suites`` (``pb.SuiteOffer``:
        id, title, headline, tasks with their trials, budget and questions, ``team_may_choose``): what a job may
        name. A station appears once it has connected to the relay.

        :param station_id: only that station's offer; None: every station's.
        """
        return list(self._call(self._stub.ListSuites,
                               pb.ListSuitesRequest(station_id=station_id or "")).stations)

    def leaderboard(self, suite: str) -> Any:
        """Return the ranking of the policies of the comparisons this team took part in on ``suite``.

        (A ``pb.LeaderboardResponse``.) A policy is a team's slot name; the relay fits Bradley-Terry over the
        complete blocks of every comparison job on the suite that this team submitted or accepted and that has
        ended: ``entries`` strongest first, each with its log-strength, the interval on it (``confidence``), its
        wins, losses and ties; this team's policies are named by slot, another team's it met there as
        ``<team>/<slot>`` with ``others`` set; ``note`` says what to keep in mind (no ranking yet, groups never
        compared). A comparison this team took no part in is never read.
        """
        return self._call(self._stub.Leaderboard, pb.LeaderboardRequest(suite=suite))

    def submit_suite_job(self, station_id: str, suite: str, tasks: Iterable[Any], *,
                         choose: Optional[Mapping[str, Any]] = None, free_form: Iterable[TaskLike] = (),
                         max_discards: Optional[int] = None, job_id: Optional[str] = None, attempts: int = 3,
                         intervals: Optional[str] = None, compare: Optional[Mapping[str, Any]] = None,
                         record: Optional[bool] = None) -> str:
        """Create a job of the station's suite tasks: each ``(task_id, trials)`` (or ``{"task", "trials"}``), in order.

        ``compare`` makes it a comparison (A/B) job, as a job file's ``compare`` says: ``{"slots": ["vision",
        "blind"], "stop": {"when": "separated", "alpha": 0.05, "max_blocks": 40, "or_out_of_reach": False}}``
        (``stop`` optional). Its tasks' trials are its blocks; each slot is served by its own
        :meth:`serve_policy` (``slot=``). The relay refuses a malformed one naming the key (``compare.slots[1]``).

        Trial ``i`` runs with the suite's seed ``i``; the station fills in every task from its own suite file.
        ``choose`` sets what the suite's ``team_may_choose`` allows (``cameras``, ``image_format``,
        ``image_quality``, ``control_frequency``); ``free_form`` adds the team's own tasks (each once, after the
        suite's, where the station allows them; scored only by its operator). The relay refuses a task the suite
        does not have, more trials than its seeds, a choice it does not allow, and any key that would let a team
        score itself, inject faults or drive the scripted operator (``InvalidTask`` naming it). Retries as
        :meth:`submit_job` does.

        :param station_id: the station to run the job.
        :param suite: the id of one of the station's suites (:meth:`list_suites`).
        :param tasks: ``(task_id, trials)`` pairs or ``{"task": ..., "trials": ...}`` mappings, in run order.
        :param choose: the team's choices the suite allows, by key.
        :param free_form: the team's own tasks (``pb.Task`` or mappings), each run once after the suite's.
        :param max_discards: discarded episodes tolerated before the job fails; None: the station's default.
        :param job_id: the id to use; None: a generated one.
        :param attempts: calls at most (see :meth:`submit_job`).
        :param intervals: ``"wilson"`` (None: the default) or ``"clopper-pearson"``.
        :param compare: a comparison job's slots and stop rule, as a job file's ``compare``; None: one policy.
        :param record: True asks for the episodes' recordings, as :meth:`submit_job`'s ``record``.
        :returns: the job id.
        :raises errors.InvalidTask: a task, trial count, choice or key refused; the reason names it.
        """
        suite_job = pb.SuiteJob(suite=suite)
        for index, entry in enumerate(tasks):
            task, trials = (entry.get("task"), entry.get("trials", 1)) if isinstance(entry, Mapping) else entry
            if not isinstance(task, str) or isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
                raise errors.InvalidTask(f"tasks[{index}]: (task id, trials >= 1) expected, got {entry!r}")
            suite_job.tasks.add(task=task, trials=trials)
        for key, value in (choose or {}).items():
            suite_job.choose[str(key)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        own = [task if isinstance(task, pb.Task) else task_from_dict(task, index)
               for index, task in enumerate(free_form)]
        episodes = sum(t.trials for t in suite_job.tasks) + len(own)
        if compare is not None:
            blocks = _compare_to_pb(compare, suite_job.compare, sum(t.trials for t in suite_job.tasks))
            episodes = blocks * len(suite_job.compare.slots)
        return self.submit_job(station_id, own, episodes, job_id, attempts=attempts, max_discards=max_discards,
                               suite_job=suite_job, intervals=intervals, record=record)

    def submit_job(self, station_id: str, tasks: Iterable[TaskLike], episodes: int,
                   job_id: Optional[str] = None, *, attempts: int = 3, duration_s: Optional[float] = None,
                   control_frequency: Optional[float] = None, max_discards: Optional[int] = None,
                   suite_job: Any = None, intervals: Optional[str] = None, record: Optional[bool] = None) -> str:
        """Create a job: ``tasks`` (``pb.Task`` or mappings) run in order, cycled, for ``episodes`` episodes.

        These are the team's own (free-form) tasks, run only where the station allows them and scored only by its
        operator; a station's benchmark tasks are named with :meth:`submit_suite_job` (``suite_job``).

        ``duration_s`` (each episode's budget, s), ``control_frequency`` (Hz) and ``max_discards`` (discarded
        episodes tolerated before the job fails) are the job's settings, as a job file has them; None leaves the
        station's default (10 s, 50 Hz, 10). A task's own ``duration_s`` / ``control_frequency`` parameter wins for
        that task. ``intervals`` is how the job's success rates get their 95 % interval in its status:
        ``"wilson"`` (None: the default) or ``"clopper-pearson"``. The relay checks them with the station's rules and
        refuses a value out of range (``InvalidTask`` naming the field). ``record=True`` asks for the episodes'
        recordings (:meth:`list_recordings`, :meth:`download_recording`); a station whose config forbids it
        refuses the job.

        The job id is chosen here (``job-`` and 16 random hex digits) unless ``job_id`` is given, and every
        attempt sends the same id and content: when an answer is lost (UNAVAILABLE, DEADLINE_EXCEEDED) the
        call is made again, and the relay answers a repeat of a job it holds with that same job, so a retry never
        makes a second job.

        :param station_id: the station to run the job.
        :param tasks: the team's own tasks, ``pb.Task`` or mappings of its fields, run in order and cycled.
        :param episodes: how many episodes the job runs.
        :param job_id: the id to use (the relay may refuse it); None: a generated one.
        :param attempts: calls at most, 1 s apart at first, doubling (1: no retry).
        :param duration_s: each episode's budget in seconds; None: the station's default.
        :param control_frequency: the control rate in Hz; None: the station's default.
        :param max_discards: discarded episodes tolerated before the job fails; None: the station's default.
        :param suite_job: a ``pb.SuiteJob`` naming suite tasks (:meth:`submit_suite_job` builds it).
        :param intervals: ``"wilson"`` (None: the default) or ``"clopper-pearson"``.
        :returns: the job id.
        :raises errors.InvalidTask: the relay (or this client) refused a task; the reason names which and why.
        :raises errors.Unavailable, errors.DeadlineExceeded: every attempt went unanswered.
        """
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"attempts must be an integer >= 1, got {attempts!r}")
        generated = job_id is None
        request = pb.SubmitJobRequest(station_id=station_id, episodes=int(episodes),
                                      job_id=new_job_id() if generated else job_id)
        if suite_job is not None:
            request.suite_job.CopyFrom(suite_job)
        for name, value in (("duration_s", duration_s), ("control_frequency", control_frequency),
                            ("max_discards", max_discards), ("intervals", intervals), ("record", record)):
            if value is not None:
                try:
                    setattr(request, name, value)
                except (TypeError, ValueError) as exc:
                    raise errors.InvalidTask(f"{name}: {value!r} refused: {exc}") from None
        for index, task in enumerate(tasks):
            request.tasks.append(task if isinstance(task, pb.Task) else task_from_dict(task, index))
        delay = _RETRY_FIRST_S
        for attempt in range(1, attempts + 1):
            try:
                return self._call(self._stub.SubmitJob, request).job_id
            except (errors.Unavailable, errors.DeadlineExceeded) as exc:
                if attempt == attempts:
                    raise
                _log.warning("submit_job %s: %s (%s); sending the same job again in %.1f s", request.job_id,
                             type(exc).__name__, exc.reason, delay)
                time.sleep(delay)
                delay = min(delay * 2, _RETRY_LONGEST_S)
            except errors.AlreadyExists:
                # A relay that does not yet answer a repeat with its job: an id generated here and visible to
                # this client can only be this call's own first attempt.
                if attempt > 1 and generated and self._holds(request.job_id):
                    return request.job_id
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _holds(self, job_id: str) -> bool:
        try:
            self.get_status(job_id)
        except errors.NotFound:
            return False
        return True

    def get_status(self, job_id: str) -> Any:
        """Return the job's latest snapshot (``pb.JobStatus``), with ``station_last_heard_unix_ms`` when known.

        :param job_id: one of this client's jobs.
        :raises errors.NotFound: no such job for this client (another team's job answers the same).
        """
        return self._call(self._stub.GetStatus, pb.GetStatusRequest(job_id=job_id))

    def cancel(self, job_id: str, reason: str = "") -> bool:
        """Ask the station to cancel the job. False when it had already ended (nothing to cancel).

        On a comparison another team submitted and invited this team to, this withdraws this team's slots: the
        job ends, naming this team.

        :param job_id: one of this client's jobs (or one it was invited to).
        :param reason: said in the job's message (bounded by the relay).
        :raises errors.NotFound: no such job for this client.
        """
        response = self._call(self._stub.CancelJob, pb.CancelJobRequest(job_id=job_id, reason=reason))
        return not response.already_terminal

    def accept(self, job_id: str) -> str:
        """Accept the invitation to a comparison job another team submitted naming this team for a slot.

        The relay holds such a job until every team it names accepted; then serve this team's slot with
        :meth:`serve_policy` (``slot=``). Returns what happened, in words (whom the job still waits for).

        :param job_id: the job's id as the invitation names it (``list_jobs``: ``owner`` and ``invitation`` set).
        :raises errors.NotFound: no invitation to that job for this client.
        """
        return self._call(self._stub.RespondInvitation,
                          pb.RespondInvitationRequest(job_id=job_id, accept=True)).message

    def decline(self, job_id: str, reason: str = "") -> str:
        """Decline the invitation to a comparison job: the job ends (CANCELLED, naming this team and ``reason``).

        :raises errors.NotFound: no invitation to that job for this client.
        """
        return self._call(self._stub.RespondInvitation,
                          pb.RespondInvitationRequest(job_id=job_id, accept=False, reason=reason)).message

    def list_jobs(self, states: Sequence[str] = (), page_size: int = 20, page_token: str = "") -> Any:
        """Return one page of this client's own jobs, newest first (``pb.ListJobsResponse``).

        ``jobs`` are ``pb.JobSummary``; ``next_page_token`` is empty on the last page; ``states`` keeps only jobs
        in those states. A comparison another team invited this client to is listed too, by the relay's id, with
        ``owner`` (the submitting team), ``invitation`` (``pending``, ``accepted``, ``declined`` or ``expired``) and
        ``slots`` (this team's).

        :param states: job state names (``"RUNNING"``, ...) to keep; empty: every state.
        :param page_size: jobs per page, 1-100.
        :param page_token: the previous page's ``next_page_token``; empty: the first page.
        """
        return self._call(self._stub.ListJobs, pb.ListJobsRequest(page_size=page_size, page_token=page_token,
                                                                 states=list(states)))

    # -- recordings (client/recordings.py) -----------------------------------------------------------------
    def list_recordings(self, job_id: str) -> list:
        """Return the recordings the relay holds for the job (``RecordingInfo``: ``refused`` says why not one).

        :param job_id: one of this client's jobs.
        :raises errors.NotFound: no such job for this client.
        """
        from strands_robots.client import recordings

        return recordings.list_recordings(self._stub, self._metadata, job_id, self.timeout_s)

    def download_recording(self, job_id: str, episode_id: str, path: "str | Path", *,
                           max_bytes: Optional[int] = None, timeout_s: Optional[float] = 600.0) -> Any:
        """Download the episode's MCAP to ``path`` (a file, or a directory: ``<episode_id>.mcap``), checked.

        The size and SHA-256 are checked against the station's (and the episode's ``recording_sha256`` in the
        job's status when it reports one); a mismatch raises ``RecordingCorrupt`` and leaves no file. Returns
        ``Downloaded`` (``path``, ``size_bytes``, ``sha256``).

        :param job_id: one of this client's jobs.
        :param episode_id: the episode whose recording to fetch (``ep_0000``, ...).
        :param path: a file to write, or a directory to write ``<episode_id>.mcap`` into.
        :param max_bytes: refuse a recording larger than this; None: no bound of this client's.
        :param timeout_s: deadline of the whole download, in seconds; None: none.
        """
        from strands_robots.client import recordings

        status = self.get_status(job_id)
        expected = next((getattr(e, "recording_sha256", "") for e in status.episodes if e.episode_id == episode_id),
                        "")
        return recordings.download(self._stub, self._metadata, job_id, episode_id, path, expected_sha256=expected,
                                   max_bytes=max_bytes, timeout_s=timeout_s)

    # -- the policy session --------------------------------------------------------------------------------
    def serve_policy(self, job_id: str, policy: Policy,
                     on_event: Optional[Callable[[Any], None]] = None, *, reconnect_s: float = 0.0,
                     slot: str = "") -> Any:
        """Serve ``policy`` for the job until it ends; returns the final ``pb.JobStatus``.

        The relay forwards the station's requests: a new episode (``policy.reset(task)``), observations
        (``policy.act`` -> chunk; :class:`EndEpisode` ends the episode as policy_completed), the end of a
        takeover (``policy.resume``), and once before the job's first lease the station's preflight: answered
        as an episode's first step (``policy.reset(task)`` then ``policy.act(observation)``, with
        ``policy.episode.preflight`` True and ``policy.episode.episode_id`` empty; the chunk is checked by the
        station, never applied). A policy that raises at the preflight is not a policy fault: the station fails
        the job before any arm moves, with the error, and this call returns that final status. ``on_event``
        sees every request (e.g. to print episode ends).

        :param job_id: one of this client's jobs.
        :param policy: the :class:`Policy` (``reset``, ``act``, ``resume``) that answers the station.
        :param on_event: called with every request the relay forwards; None: nothing.
        :param reconnect_s: when the relay becomes unreachable (restarted, network), keep trying to attach
            again for up to this many seconds per outage (0: raise at once). The station ends the episode that
            was running (its session broke) and continues with the next one.
        :param slot: a comparison job's slot (``compare.slots``) this policy serves; each slot is served by its
            own call (its own session). Empty for a job of one policy. The relay refuses a comparison served
            without a slot, and a slot the job does not have, naming the job's slots (:class:`errors.InvalidTask`
            or :class:`errors.RelayError` with the reason).
        :raises errors.PolicyFailed: the policy raised something else (the station is told first).
        :raises errors.SessionAborted: the relay ended the session before the job ended.
        :raises errors.Unavailable: the relay could not be reached (for longer than ``reconnect_s``).
        """
        keep_freed_buffers()  # each step's observation buffers are reused, not faulted in anew (malloc_tuning.py)
        outage_since: Optional[float] = None
        delay = 0.1
        while True:
            progress = []
            try:
                return self._serve_once(job_id, policy, on_event, progress, slot)
            except errors.Unavailable:
                now = time.monotonic()
                if progress or outage_since is None:
                    outage_since, delay = now, 0.1
                if reconnect_s <= 0 or now - outage_since >= reconnect_s:
                    raise
                _log.warning("relay %s unreachable; attaching to job %s again in %.1f s", self.target, job_id, delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _serve_once(self, job_id: str, policy: Policy, on_event: Optional[Callable[[Any], None]],
                    progress: list, slot: str = "") -> Any:
        outbox: "queue.Queue[Any]" = queue.Queue()
        attach = pb.SessionAttach(job_id=job_id, slot=slot)
        declared = spec_of(policy)  # what the policy needs: the station checks it before any arm moves
        if declared is not None:
            attach.spec.CopyFrom(spec_to_pb(declared))
        outbox.put(pb.PolicyReply(attach=attach))

        def replies():
            while True:
                item = outbox.get()
                if item is _CLOSE:
                    return
                yield item

        responses = self._stub.ServePolicy(replies(), metadata=self._metadata)
        final = None
        try:
            for request in responses:
                if not progress:
                    progress.append(True)  # attached: a later outage starts a new reconnect window
                if on_event is not None:
                    on_event(request)
                kind = request.WhichOneof("kind")
                if kind == "job_ended":
                    final = request.job_ended.status
                    break
                reply = self._answer(policy, request, kind)
                if reply is not None:
                    outbox.put(reply)
                    if reply.WhichOneof("kind") == "error" and kind != "preflight":  # a preflight's: the job fails
                        self._half_close_and_drain(outbox, responses)
                        raise errors.PolicyFailed(f"{reply.error.type}: {reply.error.message}")
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc) from None
        finally:
            outbox.put(_CLOSE)
            responses.cancel()
        if final is None:
            raise errors.SessionAborted(f"the relay ended the policy session of job {job_id!r} before the job "
                                        f"ended")
        return final

    @staticmethod
    def _half_close_and_drain(outbox: "queue.Queue[Any]", responses: Any, timeout_s: float = 10.0) -> None:
        """End our side once the queued replies went out, then wait (bounded) for the relay to end its side.

        A cancel instead could drop the error reply before it is sent.
        """
        import threading

        outbox.put(_CLOSE)
        timer = threading.Timer(timeout_s, responses.cancel)
        timer.daemon = True
        timer.start()
        try:
            for _ in responses:
                pass
        except grpc.RpcError:
            pass
        finally:
            timer.cancel()

    @staticmethod
    def _answer(policy: Policy, request: Any, kind: str) -> Any:
        rid = request.request_id
        try:
            if kind == "episode_start":
                policy.episode = request.episode_start
                policy.reset(request.episode_start.task)
                return pb.PolicyReply(request_id=rid, ack=pb.Ack())
            if kind in ("act", "preflight"):
                observation = request.act
                if kind == "preflight":
                    policy.episode = request.preflight.episode
                    policy.reset(request.preflight.episode.task)
                    observation = request.preflight.observation
                try:
                    chunk = policy.act(codec.observation_from_pb(observation))
                except EndEpisode as exc:
                    return pb.PolicyReply(request_id=rid, end_episode=pb.EndEpisode(reason=str(exc)))
                return pb.PolicyReply(request_id=rid, chunk=codec.action_chunk_to_pb(chunk))
            if kind == "resume":
                policy.resume(codec.observation_from_pb(request.resume))
                return pb.PolicyReply(request_id=rid, ack=pb.Ack())
        except Exception as exc:  # the policy's failure goes to the station, then ends the session
            _log.exception("policy failed on %s", kind)
            return pb.PolicyReply(request_id=rid, error=pb.PolicyError(type=type(exc).__name__, message=str(exc)))
        return None  # episode_end, station_left: informational

    # -- lifetime ----------------------------------------------------------------------------------------------
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "EvaluationClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _compare_to_pb(compare: Mapping[str, Any], msg: Any, trials: int) -> int:
    """Fill ``msg`` (a ``pb.Compare``) from a job file's ``compare`` mapping; return the job's blocks at most.

    ``trials``: the suite tasks' trials (one block each). Read by the job file's own rules
    (``job_model.compare``), so a malformed one is refused here naming the key, as the relay would.
    """
    from strands_robots.job_model.compare import compare_from_mapping
    from strands_robots.job_model.team_keys import TeamJobRefused

    try:
        request = compare_from_mapping(compare)
    except TeamJobRefused as exc:
        raise errors.InvalidTask(str(exc)) from None
    msg.slots.extend(request.slots)
    if request.teams:
        msg.slot_teams.extend(request.teams)
    stop = request.stop
    if stop is None:
        return trials
    msg.stop.when = stop.when
    msg.stop.alpha = stop.alpha
    msg.stop.or_out_of_reach = stop.or_out_of_reach
    if stop.max_blocks is not None:
        msg.stop.max_blocks = stop.max_blocks
    return request.blocks(trials)
