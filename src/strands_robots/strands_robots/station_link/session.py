"""The station's side of one job's policy session over the relay (no ROS); also a rollout ``Policy``.

    session = link.open_session(job_id)            # StationLink.open_session (slot=NAME: a comparison's slot)
    session.wait_attached(timeout_s=60)            # a policy client is serving the job
    session.start_episode("ep_0000", task, action_keys=[...], control_frequency=50, action_horizon=8)
    chunk = session.preflight(task, observation, action_keys=[...])  # before the first lease; never applied
    chunk = session.act(observation)   # list of {key: value}; raises EndEpisode (policy_completed)
    session.resume(observation)        # after an operator takeover
    session.end_episode("ep_0000", "timeout")
    session.close()

Policy sessions: :class:`PolicySession` also implements the rollout's ``Policy`` protocol (``reset``, ``act``,
``resume``), so a rollout can drive a remote policy directly. If the policy client disconnects, the relay
ends the station's stream and every pending or later call raises :class:`PolicyDisconnected` with the relay's
reason; open a new session for the next episode. Opening a session for a job replaces the one this station
still had for it (the old one ends with ``PolicyDisconnected``: "replaced by a newer policy session ..."), so
a restarted station is never locked out by its own stale session.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Any, List, Mapping, Optional, Sequence

import grpc

from strands_robots.client import codec
from strands_robots.client.malloc_tuning import keep_freed_buffers
from strands_robots.policies.base import EndEpisode
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import policy_session_pb2 as ps

__all__ = ["PolicySession", "PolicySessionError", "PolicyDisconnected", "RemotePolicyError"]

_STOP = object()


class PolicySessionError(RuntimeError):
    """The policy session cannot go on; the message is the reason (the relay's, when it ended it)."""


class PolicyDisconnected(PolicySessionError):
    """The relay ended the session: the policy client went away (or the relay did)."""


class RemotePolicyError(PolicySessionError):
    """The remote policy raised (something other than EndEpisode); ``error_type`` is its class name."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"remote policy raised {error_type}: {message}")
        self.error_type = error_type



class PolicySession:
    """The station's side of one job's policy session. Also a rollout ``Policy`` (reset / act / resume).

    Calls are synchronous and one at a time (the rollout's inference thread); each waits for the client's
    reply for at most ``reply_timeout_s``.
    """

    def __init__(self, stub: Any, metadata: Sequence, job_id: str, reply_timeout_s: float, slot: str = "") -> None:
        keep_freed_buffers()  # the observations' buffers are reused step to step instead of faulting in new pages
        self.job_id = job_id
        #: the comparison job's slot whose policy this session reaches ("" for a job of one policy)
        self.slot = slot
        self.reply_timeout_s = reply_timeout_s
        self.client_id = ""
        #: the attached client's declared ``PolicySpec`` message (None: it declared none); set before
        #: ``wait_attached`` returns
        self.policy_spec: Any = None
        self._outbox: "queue.Queue[Any]" = queue.Queue()
        self._replies: "queue.Queue[Any]" = queue.Queue()
        self._attached = threading.Event()
        self._ended = threading.Event()
        self._error: Optional[PolicySessionError] = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._episode_id = ""
        self._episodes = itertools.count()
        self._outbox.put(ps.PolicyRequest(open=ps.SessionOpen(job_id=job_id, slot=slot)))
        self._call = stub.PolicySession(self._requests(), metadata=metadata)
        self._reader = threading.Thread(target=self._read, name=f"policy-session-{job_id}", daemon=True)
        self._reader.start()

    def _requests(self):
        while True:
            item = self._outbox.get()
            if item is _STOP:
                return
            yield item

    def _read(self) -> None:
        try:
            for reply in self._call:
                if reply.WhichOneof("kind") == "attached":
                    self.client_id = reply.attached.client_id
                    self.policy_spec = reply.attached.spec if reply.attached.HasField("spec") else None
                    self._attached.set()
                else:
                    self._replies.put(reply)
            self._error = PolicyDisconnected(f"the relay closed the policy session of job {self.job_id!r}")
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.ABORTED:
                self._error = PolicyDisconnected(exc.details())
            elif exc.code() == grpc.StatusCode.CANCELLED:
                self._error = PolicySessionError(f"the policy session of job {self.job_id!r} was closed")
            else:
                self._error = PolicyDisconnected(f"policy session of job {self.job_id!r}: {exc.code().name}: "
                                                 f"{exc.details()}")
        finally:
            self._ended.set()
            self._replies.put(_STOP)
            # grpc's thread that feeds this call waits in _requests for the next request; the call is over, so
            # end it now rather than at close(), which a station whose relay ended the session may never call
            self._outbox.put(_STOP)

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def error(self) -> Optional[PolicySessionError]:
        """Why the session ended (None while it runs)."""
        return self._error if self._ended.is_set() else None

    def wait_attached(self, timeout_s: Optional[float] = None) -> str:
        """Block until a policy client serves the job; returns its client id.

        :raises PolicySessionError: on timeout, or when the session ended first (the reason says why).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._attached.is_set():
            if self._ended.is_set():
                raise self._error or PolicySessionError("the policy session ended")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise PolicySessionError(f"no policy client attached to {self._what()} within {timeout_s} s")
            self._attached.wait(0.05 if left is None else min(left, 0.05))
        return self.client_id

    def _what(self) -> str:
        return f"job {self.job_id!r} slot {self.slot!r}" if self.slot else f"job {self.job_id!r}"

    # -- requests ----------------------------------------------------------------------------------------------
    def _request(self, **kind: Any) -> Any:
        with self._lock:
            if self._ended.is_set():
                raise self._error or PolicySessionError("the policy session ended")
            rid = next(self._ids)
            self._outbox.put(ps.PolicyRequest(request_id=rid, **kind))
            deadline = time.monotonic() + self.reply_timeout_s
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PolicySessionError(f"the policy of job {self.job_id!r} did not answer within "
                                             f"{self.reply_timeout_s} s")
                try:
                    reply = self._replies.get(timeout=left)
                except queue.Empty:
                    continue
                if reply is _STOP:
                    self._replies.put(_STOP)  # later calls see it too
                    raise self._error or PolicySessionError("the policy session ended")
                if reply.request_id != rid:
                    continue  # a late answer to a request that timed out
                if reply.WhichOneof("kind") == "error":
                    raise RemotePolicyError(reply.error.type, reply.error.message)
                return reply

    def start_episode(self, episode_id: str, task: Any, *, action_keys: Sequence[str] = (),
                      control_frequency: float = 0.0, action_horizon: int = 0) -> None:
        """Start a new episode: the policy's ``reset(task)`` (``station.model.Task`` or ``pb.Task``)."""
        if not isinstance(task, ev.Task):
            from strands_robots.wire.pb_model import task_to_pb

            task = task_to_pb(task)
        self._episode_id = episode_id
        self._request(episode_start=ps.EpisodeStart(
            episode_id=episode_id, task=task, action_keys=list(action_keys),
            control_frequency=float(control_frequency), action_horizon=int(action_horizon)))

    def preflight(self, task: Any, observation: Mapping[str, Any], *, action_keys: Sequence[str] = (),
                  control_frequency: float = 0.0, action_horizon: int = 0) -> List[dict]:
        """Send the station's preflight: the first episode's start and one observation; return the policy's chunk.

        The client answers it as an episode's first step (its ``reset`` then ``act``); the chunk is checked by the
        station and never applied. ``observation`` is already encoded as the task asks (camera frames).

        :raises EndEpisode: the policy ended the episode at its first observation.
        :raises RemotePolicyError: the policy raised (its class and message).
        :raises PolicySessionError: no answer in time, or the session ended.
        """
        if not isinstance(task, ev.Task):
            from strands_robots.wire.pb_model import task_to_pb

            task = task_to_pb(task)
        start = ps.EpisodeStart(episode_id="", task=task, action_keys=list(action_keys),
                                control_frequency=float(control_frequency), action_horizon=int(action_horizon),
                                preflight=True)
        reply = self._request(preflight=ps.Preflight(
            episode=start, observation=codec.observation_to_pb(observation, skip_unsupported=True)))
        kind = reply.WhichOneof("kind")
        if kind == "end_episode":
            raise EndEpisode(reply.end_episode.reason)
        if kind != "chunk":
            raise PolicySessionError(f"expected an action chunk, the policy answered {kind}")
        return codec.action_chunk_from_pb(reply.chunk)

    def end_episode(self, episode_id: str, end_condition: str, end_detail: str = "") -> None:
        """Tell the policy client the episode ended (no answer expected)."""
        self._episode_id = ""
        if not self._ended.is_set():
            self._outbox.put(ps.PolicyRequest(episode_end=ps.EpisodeEnd(
                episode_id=episode_id, end_condition=end_condition, end_detail=end_detail)))

    # -- the rollout's Policy protocol ------------------------------------------------------------------------
    def reset(self, task: Mapping[str, Any]) -> None:
        """Start an episode from the rollout's task mapping; wait for the policy's ack.

        ``task`` holds ``instruction`` and ``action_keys``, and ``episode_id`` and ``task`` (the station's Task)
        when the station passes them.
        """
        station_task = task.get("task")
        if station_task is None:
            station_task = ev.Task(task_id=str(task.get("task_id", "")), instruction=str(task.get("instruction", "")))
        episode_id = str(task.get("episode_id") or f"ep_{next(self._episodes):04d}")
        self.start_episode(episode_id, station_task, action_keys=tuple(task.get("action_keys", ())),
                           control_frequency=float(task.get("control_frequency", 0.0) or 0.0),
                           action_horizon=int(task.get("action_horizon", 0) or 0))

    def act(self, observation: Mapping[str, Any]) -> List[dict]:
        """Return the policy's action chunk for ``observation``; raise ``EndEpisode`` when the policy ended it."""
        reply = self._request(act=codec.observation_to_pb(observation, skip_unsupported=True))
        kind = reply.WhichOneof("kind")
        if kind == "end_episode":
            raise EndEpisode(reply.end_episode.reason)
        if kind != "chunk":
            raise PolicySessionError(f"expected an action chunk, the policy answered {kind}")
        return codec.action_chunk_from_pb(reply.chunk)

    def resume(self, observation: Mapping[str, Any]) -> None:
        """After an operator takeover: the policy's ``resume(observation)``; waits for its ack."""
        self._request(resume=codec.observation_to_pb(observation, skip_unsupported=True))

    def close(self) -> None:
        """End the station's side (the client is told ``station_left``)."""
        self._outbox.put(_STOP)
        self._reader.join(timeout=5.0)
        if self._reader.is_alive():
            self._call.cancel()
            self._reader.join(timeout=5.0)
