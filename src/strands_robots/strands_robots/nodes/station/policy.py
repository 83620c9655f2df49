"""The job's policy for :class:`~strands_robots.nodes.station.robot_port.RosRobotPort`: found, declared, configured.

- **waiting for the policy**: a ``relay`` job's policy session is opened on the relay (the station's
  :class:`~strands_robots.station_link.link.StationLink`) until the job's client attaches, or the core's
  deadline ends the wait; a session this station left open in an earlier run is closed first. A comparison job
  (``spec.comparison``) opens one session per slot and is ready once every slot's client attached; each episode's
  goal then names its slot, so the rollout reaches that slot's policy. An in-process provider (``mock``, ...) is
  made once to read what it declares;
- **declared spec**: what the attached policy declares (its ``PolicySpec``; a comparison's: its first slot's),
  for the compatibility gate and the provenance; **observed cameras**: the rollout node's ``cameras`` parameter,
  what every observation holds;
- **preflight**: the attached session (every slot's) is kept open for the station's preflight
  (:mod:`.preflight`), which closes it;
- **goal config**: a ``relay`` policy gets the job and episode in ``policy_config_json`` (the relay and the
  token are the rollout node's own, from its ``relay_credentials_file``; :mod:`strands_robots.policies.relay`).

A mixin of the port: it uses the port's node, relay link and settings, rollout parameter client and
``close_policy_sessions`` client (made in the port's ``__init__``).
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Tuple

from strands_robots_msgs.srv import Resume

from strands_robots.ros.ask_again import ask_until_answered
from strands_robots.station.job import EpisodePlan, JobSpec
from strands_robots.station.job_file import task_to_mapping

__all__ = ["RelaySettings", "StationPolicyCalls"]

_PARAMETERS_TIMEOUT_S = 5.0  # the rollout node's parameter service: answered within this, or not known
_PARAMETERS_RETRY_S = 1.0  # ... asked again this often meanwhile


class RelaySettings:
    """Where the relay is and who this station is (for the ``relay`` provider and policy sessions)."""

    def __init__(self, target: str, station_id: str, token: str, token_file: str = "",
                 attach_timeout_s: float = 10.0, reply_timeout_s: float = 10.0, root_certificates: str = "",
                 seal_key: bytes = b"") -> None:
        self.target = target
        self.root_certificates = root_certificates
        self.station_id = station_id
        self.token = token
        self.token_file = token_file
        self.attach_timeout_s = attach_timeout_s
        self.reply_timeout_s = reply_timeout_s
        #: seals a comparison episode's slot in its goal (``station_link.slot_seal``; derived from the token)
        self.seal_key = seal_key


class StationPolicyCalls:
    """Wait for the job's policy, read what it declares and the cameras observed, configure the goal's policy."""

    def attached_policy_spec(self, spec: JobSpec) -> Any:
        """Return (once) the declared ``PolicySpec`` the job's last :meth:`wait_for_policy` found (None: none).

        Kept per job: a queued job's last look may run while another job waits or runs.
        """
        return self._declared.pop(spec.job_id, None)

    def attached_slot_specs(self, spec: JobSpec) -> dict:
        """Return (once) a comparison's declared ``PolicySpec`` of each slot (None: that slot declared none)."""
        return self._declared_slots.pop(spec.job_id, None) or {}

    def observed_cameras(self) -> Optional[Tuple[str, ...]]:
        """Return the cameras the rollout node puts in every observation (its ``cameras`` parameter).

        The compatibility gate compares a policy's cameras with these. None when the rollout node does not
        answer within a few seconds (the gate then uses the station's own ``cameras`` parameter).
        """
        client = self._rollout_params
        if not client.wait_for_services(timeout_sec=_PARAMETERS_TIMEOUT_S):
            return None
        answer = ask_until_answered(lambda: client.get_parameters(["cameras"]), _PARAMETERS_TIMEOUT_S,
                                    _PARAMETERS_RETRY_S)
        if answer is None:
            return None
        values = answer.values
        text = values[0].string_value if values else ""
        return tuple(n.strip() for n in text.split(",") if n.strip())

    def wait_for_policy(self, spec: JobSpec, cancelled: threading.Event) -> Tuple[bool, str]:
        from strands_robots.client.policy_spec import PolicySpecError, spec_from_pb, spec_of

        self._declared.pop(spec.job_id, None)
        self._declared_slots.pop(spec.job_id, None)
        self._drop_preflight_session(spec.job_id)
        if spec.policy_provider != "relay" and spec.comparison is not None:
            return False, (f"a comparison's slots ({', '.join(spec.comparison.slots)}) are each served through the "
                           f"relay; policy {spec.policy_provider!r} would run one policy under every slot")
        if spec.policy_provider != "relay":
            from strands_robots.policies.registry import make_policy

            try:
                self._declared[spec.job_id] = spec_of(make_policy(spec.policy_provider, dict(spec.policy_config)))
            except (ValueError, TypeError) as exc:
                return False, f"policy {spec.policy_provider!r} refused: {exc}"
            return True, f"{spec.policy_provider} policy on the rollout node"
        if self._link is None or self._relay is None:
            return False, "the job needs the relay policy but this station has no relay (relay_target is empty)"
        # a comparison's slots each have their own session and client: the job is ready once every slot's attached
        slots = tuple(spec.comparison.slots) if spec.comparison is not None else ("",)
        sessions: dict = {}
        slot_specs: dict = {}
        clients = []
        try:
            for slot in slots:
                ready, detail, session = self._attach(spec, slot, cancelled)
                if not ready:
                    return False, detail
                sessions[slot] = session
                clients.append(detail)
            first = next(iter(sessions.values()))
            for slot, session in sessions.items():
                try:
                    declared = session.policy_spec
                    parsed = None if declared is None else spec_from_pb(declared)
                except PolicySpecError as exc:
                    return False, f"policy client {session.client_id!r}{_of_slot(slot)} declared a spec that is " \
                                  f"refused: {exc}"
                if session is first:
                    self._declared[spec.job_id] = parsed
                slot_specs[slot] = parsed
            if spec.comparison is not None:
                self._declared_slots[spec.job_id] = slot_specs
            self._keep_for_preflight(spec.job_id, sessions)  # the preflight asks on them, then closes them
            sessions = {}
        finally:
            for session in sessions.values():
                session.close()
        if spec.comparison is not None:  # the job's status is the operator's view: no slot name until the end
            return True, f"the policy clients of {len(slots)} slots attached through {self._relay.target}"
        return True, f"policy client {', '.join(clients)} attached through {self._relay.target}"

    def _attach(self, spec: JobSpec, slot: str, cancelled: threading.Event) -> Tuple[bool, str, Any]:
        """Open the (job, slot) session until a client attaches: ``(True, "'client' (slot s)", session)``."""
        from strands_robots.station_link.session import PolicySessionError

        while not cancelled.is_set():
            session = self._link.open_session(spec.job_id, slot=slot)
            kept = False
            try:
                while not cancelled.is_set():
                    try:
                        client = session.wait_attached(timeout_s=0.5)
                        kept = True
                        return True, f"{client!r}{_of_slot(slot)}", session
                    except PolicySessionError as exc:
                        if session.error is not None and "already has a policy session open" in str(exc):
                            self.close_policy_sessions()  # left open by the rollout of a previous station run
                            break
                        if session.error is not None:  # the session itself ended: open another
                            self._node.get_logger().warning(f"policy session of {spec.job_id}{_of_slot(slot)}: "
                                                            f"{exc}", throttle_duration_sec=5.0)
                            break
            finally:
                if not kept:
                    session.close()
            cancelled.wait(0.2)
        return False, "cancelled while waiting for the policy", None

    def _policy_config(self, plan: EpisodePlan) -> dict:
        if plan.policy_provider != "relay":
            return dict(plan.policy_config)
        # The remote policy reads its own options (``policy.*`` task parameters) from the task it is sent. The
        # relay and the station's token are the rollout node's own start-time configuration: never in a goal.
        config: dict = {}
        if self._relay is not None:
            relay = self._relay
            config.update(job_id=self._job_id, episode_id=plan.episode_id, task=task_to_mapping(plan.task),
                          attach_timeout_s=relay.attach_timeout_s, reply_timeout_s=relay.reply_timeout_s)
            if plan.compare_slot:  # a comparison's episode: the policy of its slot, through that slot's session
                # anyone on the domain can read a goal: the slot (which names the policy) goes sealed for the
                # rollout node's key, beside the blind label the operator sees anyway
                from strands_robots.station_link.slot_seal import seal_slot

                config["sealed_slot"] = seal_slot(relay.seal_key, self._job_id, plan.episode_id, plan.compare_slot)
                config["blind_label"] = plan.blind_label
        return config

    _job_id = ""

    def begin_job(self, job_id: str) -> None:
        self._job_id = job_id

    def close_policy_sessions(self) -> None:
        """Ask the rollout node to close the relay policy sessions of its ended episodes (best effort).

        Unanswered within 2 s the request may still reach the rollout node later, during the next episode: it
        closes only the sessions of ended episodes (``policies.relay.close_sessions``), never that one's.
        """
        req = Resume.Request()
        req.operator_name = "station"
        if self._call(self._close_sessions, req, timeout_s=2.0) is None:
            self._node.get_logger().warning("close_policy_sessions: no answer from the rollout node within 2 s "
                                            "(a late request closes only ended episodes' sessions)")


def _of_slot(slot: str) -> str:
    return f" (slot {slot})" if slot else ""
