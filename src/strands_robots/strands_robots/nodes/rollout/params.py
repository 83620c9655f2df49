"""The rollout node's parameters: each one's default, description and range, and the values it refuses.

The ranges come from the rollout's own run limits (``rollout.run_spec.FIELD_LIMITS``), so a parameter and a
goal field are refused by one rule. The node declares them (``node.py``); a parameters file is checked
against them before any node starts (``cli/parameters_file.py``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange

from strands_robots.driver_link.client import (
    COMMAND_PATHS,
    COMMAND_WINDOW_MAX_S,
    COMMAND_WINDOW_MIN_S,
    DEFAULT_COMMAND_WINDOW_S,
)
from strands_robots.rollout.driver_watch import SILENCE_MAX_S, SILENCE_MIN_S, default_silence_s
from strands_robots.policies.registry import known_providers
from strands_robots.rollout.run_spec import FIELD_LIMITS


EXIT_DELIVERY_WAIT_S = 1.0  # exit_delivery_wait_s's default


def _float_range(lo: float, hi: float) -> list:
    return [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]


def _int_range(lo: int, hi: int) -> list:
    return [IntegerRange(from_value=int(lo), to_value=int(hi), step=1)]


def _limit(field: str, zero_ok: bool = False, none_value: "int | None" = None) -> dict:
    """Return the descriptor range of a run field from the shared ``FIELD_LIMITS``.

    An exclusive minimum becomes the smallest representable value above it for floats; the exact rule is
    enforced by ``validate_run``.

    :param zero_ok: the parameter also takes 0 (meaning "derive it", e.g. ``max_steps``).
    :param none_value: an integer below the range that means "none" (``seed`` -1).
    """
    lim = FIELD_LIMITS[field]
    if lim.integer:
        lo = int(lim.minimum)
        if zero_ok:
            lo = min(lo, 0)
        if none_value is not None:
            lo = min(lo, none_value)
        return {"integer_range": _int_range(lo, int(min(lim.maximum, 2**63 - 1)))}
    lo = 0.0 if zero_ok else (math.nextafter(lim.minimum, math.inf) if lim.exclusive_minimum else lim.minimum)
    return {"floating_point_range": _float_range(lo, lim.maximum)}


def _describe(field: str, text: str) -> str:
    return f"{text} ({FIELD_LIMITS[field].text()})"


# name: (default, description, extra descriptor fields). read_only: applied at construction only.
PARAMETERS: dict[str, tuple[Any, str, dict]] = {
    "robot_name": ("sim_arms", "robot name reported in RunPolicyStarted (a goal's robot_name wins)", {}),
    "driver_namespace": ("", "namespace of the arm driver's topics/services; empty: this node's namespace",
                         {"read_only": True}),
    "command_path": ("stream", "how actions reach the driver: stream (ActionCommand/ActionVerdict topics, "
                               "the default) or service (one SendAction call per step)", {"read_only": True}),
    "command_window_s": (DEFAULT_COMMAND_WINDOW_S,
                         "stream path: at most this much of commands in flight (at least 2; the loop holds "
                         "beyond it), and how long after sending the driver still applies a command (later: "
                         "stale, the arms hold)", {"floating_point_range": _float_range(COMMAND_WINDOW_MIN_S,
                                                                                        COMMAND_WINDOW_MAX_S),
                                                   "read_only": True}),
    "verdict_timeout_s": (0.0, "stream path: a step whose verdict has not come this long after its command is "
                               "unknown (0: the dead-driver bound, driver_silence_s)",
                          {"floating_point_range": _float_range(0.0, 60.0), "read_only": True}),
    "driver_silence_s": (0.0, f"end the episode as an error when the driver is silent this long (no joint_states "
                              f"or no answers); 0: the default, {default_silence_s(0.02):g} s",
                         {"floating_point_range": _float_range(0.0, SILENCE_MAX_S), "read_only": True}),
    "control_frequency": (50.0, _describe("control_frequency", "control rate in Hz"), _limit("control_frequency")),
    "policy_provider": ("mock", "policy provider: " + ", ".join(known_providers()), {}),
    "policy_config_json": ("", "policy provider options as a JSON object; empty for none", {}),
    "instruction": ("wave both arms", "language instruction for the policy", {}),
    "duration_s": (5.0, _describe("duration_s", "episode budget in seconds"), _limit("duration_s")),
    "max_steps": (0, _describe("n_steps", "step budget; 0 derives it from duration_s"),
                  _limit("n_steps", zero_ok=True)),
    "action_horizon": (8, _describe("action_horizon", "maximum actions per chunk"), _limit("action_horizon")),
    "async_rtc": (False, "prefetch chunks asynchronously in autorun episodes (a goal says for itself)", {}),
    "rtc_inference_timeout_s": (2.0, _describe("rtc_inference_timeout_s", "async inference deadline (s)"),
                                _limit("rtc_inference_timeout_s")),
    "record": (False, "record autorun episodes to MCAP (a goal says for itself)", {}),
    "recording_dir": ("/tmp/strands_robots/recordings", "where MCAP recordings go", {}),
    "event_queue_depth": (8192, "observer publish queue bound; a full queue drops step events (counted)",
                          {"integer_range": _int_range(1, 1_000_000), "read_only": True}),
    "exit_delivery_wait_s": (EXIT_DELIVERY_WAIT_S, "at exit, how long after its last event or result the readers "
                             "may take to acknowledge them (a reliable writer repairs a lost sample only while it "
                             "exists)", {"floating_point_range": _float_range(0.0, 30.0), "read_only": True}),
    "require_lease": (True, "acquire a control lease from the driver when a goal brings none", {}),
    "lease_holder": ("rollout", "holder name used when acquiring a lease", {}),
    "lease_priority": (10, "priority used when acquiring a lease", {"integer_range": _int_range(0, 1000)}),
    "lease_duration_s": (2.0, "lease length; renewed every third of it",
                         {"floating_point_range": _float_range(0.1, 3600.0)}),
    "start_pose_before_episode": (True, "move the arms to the start pose before every episode", {}),
    "driver_timeout_s": (15.0, "how long to wait for the arm driver to come up",
                         {"floating_point_range": _float_range(0.1, 3600.0)}),
    "action_timeout_s": (0.5, "service path: SendAction deadline (s); past it the step is a coarse error",
                         {"floating_point_range": _float_range(0.001, 60.0), "read_only": True}),
    "seed": (-1, _describe("seed", "policy seed; negative for none"), _limit("seed", none_value=-1)),
    "autorun_episodes": (0, "episodes to run at start-up with these parameters",
                         {"integer_range": _int_range(0, 1_000_000), "read_only": True}),
    "exit_after_autorun": (False, "exit once the autorun episodes are done", {}),
    "relay_credentials_file": ("", "the station's relay credentials file (0600; wire/credentials.py), read once at "
                                   "start: the relay policy provider's relay address and station token. Empty: "
                                   "the relay provider is refused", {"read_only": True}),
    "autorun_wait_subscribers": (0, "before the autorun episodes, wait (at most driver_timeout_s) until "
                                    "observer_events has this many subscribers, so a watcher started with the "
                                    "node sees the whole stream", {"integer_range": _int_range(0, 1000),
                                                                   "read_only": True}),
    # Cameras (strands_robots.cameras, nodes/rollout/camera_frames.py): <camera>.image in every observation.
    "cameras": ("", "comma-separated cameras whose <camera>/image_raw frames every observation holds "
                    "(<camera>.image); empty: none", {"read_only": True}),
    "cameras_file": ("", "camera file naming their size and stale bound; empty: the package's config/cameras.yaml",
                     {"read_only": True}),
    "camera_namespace": ("", "namespace of the camera node's topics; empty: this node's", {"read_only": True}),
    "camera_scene_node": ("", "a simulated camera node (e.g. camera): each episode lays out its scene for the "
                              "goal's task and seed; empty: none", {"read_only": True}),
}


def value_refusal(name: str, value: Any) -> str:
    """Say why the rollout node refuses ``value`` for ``name`` beyond its type and range ("" when it takes it)."""
    if name == "policy_config_json" and value:
        try:
            if not isinstance(json.loads(value), dict):
                return "policy_config_json must be a JSON object"
        except ValueError as exc:
            return f"policy_config_json is not JSON: {exc}"
    if name == "policy_provider":
        if str(value).strip().lower() not in known_providers():
            return f"policy_provider {value!r} is not a known provider ({', '.join(known_providers())})"
    if name == "command_path" and value not in COMMAND_PATHS:
        return f"command_path must be one of {', '.join(COMMAND_PATHS)}, got {value!r}"
    if name == "driver_silence_s" and value and not (SILENCE_MIN_S <= value <= SILENCE_MAX_S):
        return f"driver_silence_s must be 0 or in [{SILENCE_MIN_S:g}, {SILENCE_MAX_S:g}] s, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} must be finite"
    return ""
