"""RelayPolicy: a remote policy, served by an Evaluation Client, reached through the relay.

The policy provider ``relay``. The rollout drives it like any other policy; each call goes to the policy
client of the job through the relay's policy session (:class:`~strands_robots.station_link.session.PolicySession`,
the station's side): ``reset`` opens the session, waits for the client and starts the episode (the client's
``reset(task)``), ``act`` returns the client's chunk (its ``EndEpisode`` ends the episode as
``policy_completed``), ``resume`` is the client's ``resume(observation)`` after an operator takeover.

**Where the relay is, and who the station is, never come from the config.** They are the process's start-time
configuration: a :class:`~strands_robots.wire.credentials.RelayCredentials` read once from a private (0600)
file with :func:`~strands_robots.wire.credentials.load_relay_credentials` and handed over explicitly: the
rollout node reads its read-only ``relay_credentials_file`` parameter at start; in process, pass
``RelayPolicy(config, credentials=...)`` (or a factory from :func:`relay_policy_factory`) as the policy. A
``RunEpisode`` goal, which any node on the ROS domain can send, can therefore neither point the rollout at
another relay nor make it read a file: ``relay_target``, ``station_token``, ``station_token_file``,
``station_id`` and ``root_certificates`` are unknown options, refused before anything moves. Without
credentials the provider is refused with a reason saying where they come from.

Config (from the station, in the RunEpisode goal's ``policy_config_json``):

- ``job_id`` (str, required), ``episode_id`` (str, required);
- ``slot`` (str, optional): a comparison job's slot (``compare.slots``): the episode reaches the policy served for
  that slot (``job serve JOB --slot NAME``), through that slot's own policy session;
- ``sealed_slot`` (str, optional), ``blind_label`` (str, optional): what the station sends instead of ``slot``: the
  slot sealed with a key derived from the station's token (:mod:`strands_robots.station_link.slot_seal`; anyone on
  the ROS domain can read a goal, and the slot names the policy), and the block's blind label, which names the
  policy in what the episode reports (a lost session) until the job ends;
- ``task`` (mapping, optional): the station's task in the job-file form (``station.job_file.task_to_mapping``);
  the client gets it exactly (instruction, layout, parameters, scoring). Without it the rollout's instruction;
  its ``cameras`` / ``image_format`` / ``image_quality`` parameters say which camera frames the policy gets, at
  what size and how encoded (:mod:`strands_robots.cameras.request`): each ``<camera>.image`` goes compressed
  (JPEG by default) as ``Value.image`` and the client decodes it to an HWC uint8 array;
- ``attach_timeout_s`` (float, default 10): how long ``reset`` waits for the policy client;
- ``reply_timeout_s`` (float, default 10): how long each call waits for the client's answer.

When the policy client is gone (it disconnected, or never attached in time) every call raises
:class:`RelayPolicyLost`: the rollout ends with that error and the station re-runs the task once the policy is
back. Only one session per job is open in a process: a new episode's ``reset`` closes the previous one.

A session is its episode's: :func:`close_sessions` (the rollout node's ``close_policy_sessions`` service, which
the station calls after each episode) closes only the sessions of episodes that are over (:func:`episodes_over`,
which the rollout node calls when its episode ends, before it answers the goal), never the one a running
episode opened. A close request can reach the rollout node late (the station gives up waiting for its answer
after 2 s; DDS may deliver it later), after the next episode's ``reset`` opened that episode's session: closing
that one would end the episode as a lost policy (a station fault) for nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional

from strands_robots.job_model.compare import SLOT_PATTERN
from strands_robots.policies.base import EndEpisode
from strands_robots.wire.credentials import RelayCredentials

__all__ = ["RelayPolicy", "RelayPolicyLost", "PROVIDER", "OPTIONS", "NO_CREDENTIALS", "make_relay_policy",
           "relay_policy_factory", "close_sessions", "episodes_over"]

PROVIDER = "relay"
OPTIONS = frozenset({"job_id", "episode_id", "slot", "sealed_slot", "blind_label", "task", "attach_timeout_s",
                     "reply_timeout_s"})
_REQUIRED = ("job_id", "episode_id")
#: Why the provider is refused in a process that was given no relay credentials.
NO_CREDENTIALS = (f"{PROVIDER} policy: this process has no relay credentials (start the rollout node with its "
                  "relay_credentials_file parameter naming a 0600 credentials file; in process pass "
                  "RelayPolicy(config, credentials=load_relay_credentials(path)))")
_BUSY_RETRY_S = 0.05
#: Begins every RelayPolicyLost message, so the station recognises it in a rollout's result text.
LOST_MARKER = "relay policy lost"

_live_lock = threading.Lock()
_live: Dict[str, "_Live"] = {}  # job_id -> the newest episode's session in this process


class RelayPolicyLost(RuntimeError):
    """The job's policy client is not there (disconnected, never attached, or the relay ended the session)."""


def _positive(cfg: Mapping[str, Any], name: str, default: float) -> float:
    value = cfg.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{PROVIDER} policy: {name} must be a number > 0, got {value!r}")
    return float(value)


class _Live:
    """A job's open session in this process: its link, and whether the episode that opened it is over."""

    __slots__ = ("link", "session", "over")

    def __init__(self, link: Any, session: Any) -> None:
        self.link = link
        self.session = session
        self.over = False


def _close_live(job_id: str, *, session: Any = None, over_only: bool = False) -> bool:
    """Close the job's open session; return whether one was closed.

    :param session: close it only if it is this one (a policy closes its own session, never a newer one).
    :param over_only: close it only if its episode is over (see :func:`close_sessions`).
    """
    with _live_lock:  # looked at and taken in one step: a session the next reset opens meanwhile is not touched
        old = _live.get(job_id)
        if old is None or (session is not None and old.session is not session) or (over_only and not old.over):
            return False
        del _live[job_id]
    try:
        old.session.close()
    finally:
        old.link.close()
    return True


def episodes_over() -> int:
    """Mark the sessions this process holds open as their episodes' past; return how many.

    The rollout node calls it when its episode ended (episodes run one at a time in it), before it answers the
    goal: a ``close_policy_sessions`` the station sends after that answer closes them.
    """
    with _live_lock:
        for live in _live.values():
            live.over = True
        return len(_live)


def close_sessions() -> int:
    """Close the policy sessions of this process whose episode is over (:func:`episodes_over`); return how many.

    The session of a running episode is left open, whenever the request to close was sent: the one that was
    meant (the previous episode's) is over, and the running episode's ``reset`` already closed it.
    """
    with _live_lock:
        jobs = list(_live)
    return sum(1 for job_id in jobs if _close_live(job_id, over_only=True))


class RelayPolicy:
    """The ``relay`` provider (see the module docstring). Building it checks the config and connects to nothing.

    :param config: the episode's options (``job_id``, ``episode_id``, ``task``, the two timeouts); nothing else.
    :param credentials: the station's relay credentials, from its start-time configuration.
    :raises ValueError: an unknown option (a relay address, a token or a path among them), a missing or invalid
        one, or no credentials; the options are checked first, so such a config is refused by name.
    """

    def __init__(self, config: Optional[Mapping[str, Any]] = None, *,
                 credentials: Optional[RelayCredentials] = None) -> None:
        cfg = dict(config or {})
        unknown = sorted(set(map(str, cfg)) - OPTIONS)
        if unknown:
            raise ValueError(f"{PROVIDER} policy: unknown options {unknown}; allowed: {sorted(OPTIONS)} (the relay "
                             "address and the station's credentials are the process's start-time configuration, "
                             "never policy options)")
        for name in _REQUIRED:
            if not isinstance(cfg.get(name), str) or not cfg[name].strip():
                raise ValueError(f"{PROVIDER} policy: {name} must be a non-empty string")
        slot = cfg.get("slot", "")
        if not isinstance(slot, str) or (slot and not SLOT_PATTERN.match(slot)):
            raise ValueError(f"{PROVIDER} policy: slot must be a slot name ([A-Za-z0-9._-]{{1,64}}), got "
                             f"{str(slot)[:80]!r}")
        label = cfg.get("blind_label", "")
        if not isinstance(label, str) or len(label) > 8:
            raise ValueError(f"{PROVIDER} policy: blind_label must be a blind label (at most 8 characters), got "
                             f"{str(label)[:80]!r}")
        #: how this episode's policy is named in what it reports (the blind label while the slot is sealed)
        self.shown = f"slot {slot!r}" if slot else ""
        sealed = cfg.get("sealed_slot")
        if sealed is not None:
            if slot:
                raise ValueError(f"{PROVIDER} policy: slot and sealed_slot are one option, given twice")
            if not isinstance(sealed, str):
                raise ValueError(f"{PROVIDER} policy: sealed_slot must be a string")
            if credentials is None:
                raise ValueError(NO_CREDENTIALS)
            from strands_robots.station_link.slot_seal import SlotSealError, seal_key, unseal_slot

            try:
                slot = unseal_slot(seal_key(getattr(credentials, "token", "")), str(cfg.get("job_id")),
                                   str(cfg.get("episode_id")), sealed)
            except SlotSealError as exc:
                raise ValueError(f"{PROVIDER} policy: {exc}") from None
            self.shown = f"policy {label}" if label else "its slot"
        self.slot = slot
        if cfg.get("task") is not None and not isinstance(cfg["task"], Mapping):
            raise ValueError(f"{PROVIDER} policy: task must be a mapping (the job-file form of the task)")
        self.attach_timeout_s = _positive(cfg, "attach_timeout_s", 10.0)
        self.reply_timeout_s = _positive(cfg, "reply_timeout_s", 10.0)
        if credentials is None:
            raise ValueError(NO_CREDENTIALS)
        if not isinstance(credentials, RelayCredentials):
            raise TypeError(f"{PROVIDER} policy: credentials must be RelayCredentials, got "
                            f"{type(credentials).__name__}")
        self._credentials = credentials
        self.target = credentials.target
        self.station_id = credentials.station_id
        self.job_id = cfg["job_id"]
        self.episode_id = cfg["episode_id"]
        self._task_mapping = cfg.get("task")
        from strands_robots.cameras.request import CameraRequestError, image_request

        try:
            self._images = image_request((self._task_mapping or {}).get("parameters"))
        except CameraRequestError as exc:
            raise ValueError(f"{PROVIDER} policy: the task's camera request is refused: {exc}") from None
        self._session: Any = None
        self.client_id = ""

    # -- Policy protocol --------------------------------------------------------------------------------------
    def reset(self, task: Mapping[str, Any]) -> None:
        """Open the job's session, wait for its policy client, start the episode (the client's ``reset``)."""
        from strands_robots.station_link.session import PolicySessionError

        session = self._open()
        station_task = self._station_task(task)
        try:
            session.start_episode(self.episode_id, station_task, action_keys=tuple(task.get("action_keys", ())),
                                  control_frequency=float(task.get("control_frequency", 0.0) or 0.0),
                                  action_horizon=int(task.get("action_horizon", 0) or 0))
        except PolicySessionError as exc:
            raise self._lost(exc) from None

    def act(self, observation: Mapping[str, Any]) -> List[dict]:
        from strands_robots.station_link.session import PolicyDisconnected, PolicySessionError, RemotePolicyError

        session = self._require()
        observation = self._encoded(observation)
        try:
            return session.act(observation)
        except EndEpisode:
            raise
        except RemotePolicyError:
            raise
        except (PolicyDisconnected, PolicySessionError) as exc:
            raise self._lost(exc) from None

    def resume(self, observation: Mapping[str, Any]) -> None:
        from strands_robots.station_link.session import PolicySessionError, RemotePolicyError

        session = self._require()
        observation = self._encoded(observation)
        try:
            session.resume(observation)
        except RemotePolicyError:
            raise
        except PolicySessionError as exc:
            raise self._lost(exc) from None

    def close(self) -> None:
        """Close this episode's session (the next episode's ``reset`` does it too); never a newer episode's."""
        if self._session is not None:
            _close_live(self.job_id, session=self._session)
        self._session = None

    # -- internals ----------------------------------------------------------------------------------------------
    def _open(self) -> Any:
        from strands_robots.station_link.link import StationLink
        from strands_robots.station_link.session import PolicySessionError

        _close_live(self.job_id)  # the previous episode's session of this job, if it is still open
        creds = self._credentials
        link = StationLink(creds.targets, creds.station_id, creds.token, root_certificates=creds.root_certificates)
        deadline = time.monotonic() + self.attach_timeout_s
        while True:
            session = link.open_session(self.job_id, slot=self.slot, reply_timeout_s=self.reply_timeout_s)
            try:
                self.client_id = session.wait_attached(timeout_s=max(0.01, deadline - time.monotonic()))
                break
            except PolicySessionError as exc:
                session.close()
                # The station's previous session of this job may still be closing at the relay: try again.
                if "already has a policy session open" in str(exc) and time.monotonic() < deadline:
                    time.sleep(_BUSY_RETRY_S)
                    continue
                link.close()
                raise self._lost(exc) from None
        with _live_lock:
            _live[self.job_id] = _Live(link, session)
        self._session = session
        return session

    def _encoded(self, observation: Mapping[str, Any]) -> dict:
        """Return the observation with its camera frames as the task asks (selected, resized, JPEG or PNG)."""
        from strands_robots.cameras.request import encode_observation

        return encode_observation(observation, self._images)

    def _require(self) -> Any:
        if self._session is None:
            raise RelayPolicyLost(f"{LOST_MARKER}: the policy session of job {self.job_id!r} is not open (reset "
                              "first)")
        return self._session

    def _station_task(self, task: Mapping[str, Any]) -> Any:
        from strands_robots.station.model import ScoringSheet, Task

        if self._task_mapping is not None:
            from strands_robots.station.job_file import task_from_mapping

            return task_from_mapping(self._task_mapping, 0)
        return Task(task_id=str(task.get("task_id", "")), instruction=str(task.get("instruction", "")),
                    layout=str(task.get("layout", "")), parameters=dict(task.get("parameters", {}) or {}),
                    scoring=ScoringSheet(()))

    def _lost(self, exc: Exception) -> RelayPolicyLost:
        slot = f" {self.shown}" if self.shown else ""
        return RelayPolicyLost(f"{LOST_MARKER}: the policy session of job {self.job_id!r}{slot} was lost during "
                               f"{self.episode_id}: {exc}")


def make_relay_policy(config: Mapping[str, Any]) -> RelayPolicy:
    """Build the ``relay`` provider without credentials (the registry's factory): refused with its reason.

    The options are still checked first, so a config naming a relay, a token or a path is refused by name.
    """
    return RelayPolicy(config)


def relay_policy_factory(credentials: RelayCredentials) -> Callable[[Mapping[str, Any]], RelayPolicy]:
    """Return a factory building the ``relay`` provider with ``credentials`` (a process's start-time ones)."""
    if not isinstance(credentials, RelayCredentials):
        raise TypeError(f"relay_policy_factory needs RelayCredentials, got {type(credentials).__name__}")

    def factory(config: Mapping[str, Any]) -> RelayPolicy:
        return RelayPolicy(config, credentials=credentials)

    return factory
