"""The topics a simulated station publishes, as the monitoring tools subscribe to them (no rclpy here).

Each topic has a name relative to the station's namespace (``/diagnostics`` is absolute, as diagnostic tools
expect), its message type and the kind of QoS its publisher offers (``ros/qos.py``):

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

and per camera ``<camera>`` (:func:`camera_topics`, the camera node's topics: ``nodes/camera/node.py``)
``<camera>/image_raw/compressed`` (``sensor_msgs/msg/CompressedImage``) and ``<camera>/camera_info``
(``sensor_msgs/msg/CameraInfo``), QoS kind sensor (best effort, as camera drivers publish). The raw
``image_raw`` is not among them: a tool records and streams the JPEG, as image_transport's users do.

A latched topic's subscriber must be transient-local too, or it never receives the sample published before it
joined; every tool here subscribes with the publisher's own profile.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QOS_KINDS", "StrandsTopic", "STRANDS_TOPICS", "LATCHED", "SENSOR", "camera_topics", "resolve",
           "topics_in"]

EVENT = "event"
LATCHED = "latched"
STATE = "state"
COMMAND = "command"
DIAGNOSTICS = "diagnostics"
SENSOR = "sensor"
QOS_KINDS = (EVENT, LATCHED, STATE, COMMAND, DIAGNOSTICS, SENSOR)

COMPRESSED_IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"


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


def camera_topics(cameras: "list[str] | tuple[str, ...]") -> tuple[StrandsTopic, ...]:
    """``<camera>/image_raw/compressed`` and ``<camera>/camera_info`` of each camera, in the given order."""
    return tuple(t for cam in cameras for t in (StrandsTopic(f"{cam}/image_raw/compressed", COMPRESSED_IMAGE_TYPE,
                                                             SENSOR),
                                                 StrandsTopic(f"{cam}/camera_info", CAMERA_INFO_TYPE, SENSOR)))


def resolve(namespace: str, name: str) -> str:
    """``/ns/name`` for a relative name, ``name`` itself when it is absolute."""
    if name.startswith("/"):
        return name
    ns = str(namespace or "").strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


def topics_in(namespace: str, names: "list[str] | tuple[str, ...] | None" = None,
              cameras: "list[str] | tuple[str, ...]" = (), camera_namespace: "str | None" = None,
              ) -> list[tuple[str, StrandsTopic]]:
    """``(live name, topic)`` for every strands topic, or only those whose relative name is in ``names``.

    Then the topics of each camera in ``cameras`` (:func:`camera_topics`), under ``camera_namespace``
    (default: ``namespace``).

    :raises ValueError: a name in ``names`` is not a strands topic (the message lists the known ones).
    """
    chosen = list(STRANDS_TOPICS)
    if names:
        known = {t.name.lstrip("/"): t for t in STRANDS_TOPICS}
        unknown = [n for n in names if n.lstrip("/") not in known]
        if unknown:
            raise ValueError(f"not a strands topic: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        chosen = [known[n.lstrip("/")] for n in names]
    cam_ns = namespace if camera_namespace is None else camera_namespace
    return [(t.resolve(namespace), t) for t in chosen] + [(t.resolve(cam_ns), t) for t in camera_topics(cameras)]
