"""The topics a simulated station publishes, as the monitoring tools subscribe to them (no rclpy here).

Each topic has a name relative to the station's namespace (``/diagnostics`` is absolute, as diagnostic tools
expect), its message type and the kind of QoS its publisher offers (``nodes/_qos.py``):

======================  ========================================  ===========
topic                   type                                      QoS kind
======================  ========================================  ===========
``observer_events``     ``strands_robots_msgs/msg/ObserverEvent``  event
``episode_results``     ``strands_robots_msgs/msg/EpisodeResult``  event
``job_status``          ``strands_robots_msgs/msg/JobStatus``      latched
``safety_stop``         ``strands_robots_msgs/msg/SafetyStop``     latched
``driver_status``       ``strands_robots_msgs/msg/DriverStatus``   latched
``lease_state``         ``strands_robots_msgs/msg/LeaseState``     latched
``joint_states``        ``sensor_msgs/msg/JointState``             state
``action_commands``     ``strands_robots_msgs/msg/ActionCommand``  command
``action_verdicts``     ``strands_robots_msgs/msg/ActionVerdict``  command
``/diagnostics``        ``diagnostic_msgs/msg/DiagnosticArray``    diagnostics
======================  ========================================  ===========

A latched topic's subscriber must be transient-local too, or it never receives the sample published before it
joined; every tool here subscribes with the publisher's own profile.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QOS_KINDS", "StrandsTopic", "STRANDS_TOPICS", "LATCHED", "resolve", "topics_in"]

EVENT = "event"
LATCHED = "latched"
STATE = "state"
COMMAND = "command"
DIAGNOSTICS = "diagnostics"
QOS_KINDS = (EVENT, LATCHED, STATE, COMMAND, DIAGNOSTICS)


@dataclass(frozen=True)
class StrandsTopic:
    """One topic: ``name`` (relative to the namespace, or absolute), ``type_name`` (``pkg/msg/Type``), QoS kind."""

    name: str
    type_name: str
    qos: str

    @property
    def latched(self) -> bool:
        return self.qos == LATCHED

    def resolve(self, namespace: str) -> str:
        """Return the live topic name under ``namespace`` (``strands`` or ``/strands``; "" is the root)."""
        return resolve(namespace, self.name)


STRANDS_TOPICS: tuple[StrandsTopic, ...] = (
    StrandsTopic("observer_events", "strands_robots_msgs/msg/ObserverEvent", EVENT),
    StrandsTopic("episode_results", "strands_robots_msgs/msg/EpisodeResult", EVENT),
    StrandsTopic("job_status", "strands_robots_msgs/msg/JobStatus", LATCHED),
    StrandsTopic("safety_stop", "strands_robots_msgs/msg/SafetyStop", LATCHED),
    StrandsTopic("driver_status", "strands_robots_msgs/msg/DriverStatus", LATCHED),
    StrandsTopic("lease_state", "strands_robots_msgs/msg/LeaseState", LATCHED),
    StrandsTopic("joint_states", "sensor_msgs/msg/JointState", STATE),
    StrandsTopic("action_commands", "strands_robots_msgs/msg/ActionCommand", COMMAND),
    StrandsTopic("action_verdicts", "strands_robots_msgs/msg/ActionVerdict", COMMAND),
    StrandsTopic("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", DIAGNOSTICS),
)


def resolve(namespace: str, name: str) -> str:
    """``/ns/name`` for a relative name, ``name`` itself when it is absolute."""
    if name.startswith("/"):
        return name
    ns = str(namespace or "").strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


def topics_in(namespace: str, names: "list[str] | tuple[str, ...] | None" = None) -> list[tuple[str, StrandsTopic]]:
    """``(live name, topic)`` for every strands topic, or only those whose relative name is in ``names``.

    :raises ValueError: a name in ``names`` is not a strands topic (the message lists the known ones).
    """
    chosen = list(STRANDS_TOPICS)
    if names:
        known = {t.name.lstrip("/"): t for t in STRANDS_TOPICS}
        unknown = [n for n in names if n.lstrip("/") not in known]
        if unknown:
            raise ValueError(f"not a strands topic: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        chosen = [known[n.lstrip("/")] for n in names]
    return [(t.resolve(namespace), t) for t in chosen]
