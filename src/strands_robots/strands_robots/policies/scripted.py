"""ScriptedPolicy: deterministic scripts that provoke the arm driver's refusals and safety stops for real.

Tests of the driver and the loop need commands the arm cannot follow: a joint pushed against its limit until the
measured torque trips the safety envelope, keys that name no actuator, values outside the joint limits, NaNs.
Each mode below is one such script; every key it does not drive is held at the position observed when the
episode started (or when the operator handed back), so only the scripted key moves.

Modes (config ``mode``):

- ``torque_ramp`` (default): ramp ``joint`` linearly from its observed position to ``target`` over
  ``ramp_steps`` actions, then keep commanding ``target``. The default target is the joint's upper limit (still
  accepted by the driver, so it is applied) — the arm cannot hold it against its own limit or an obstacle, so
  the torque rises until the safety envelope stops the arm.
- ``unknown_keys``: every action key held, plus ``unknown_keys`` that no actuator has; resolution is partial.
- ``only_unknown_keys``: only ``unknown_keys``; no key resolves (the loop's fail-fast case).
- ``out_of_range``: every action key held, except ``out_of_range_keys`` (default: ``joint``; ``"all"`` for
  every key) commanded ``out_of_range_margin`` beyond their upper limit; partial, or none with ``"all"``.
  Needs ``joint_limits`` for those keys.
- ``non_finite``: every action key held, ``joint`` commanded NaN; partial.
- ``vision_reach``: finds the red cube in ``<camera>.image`` (option ``camera``, default ``scene``) and reaches
  the nearer arm's tool toward it over ``ramp_s`` (default 1.5 s); holds still when it sees no cube
  (:mod:`strands_robots.policies.vision_reach`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from strands_robots.policies import options as opt
from strands_robots.policies.base import EndEpisode

PROVIDER = "scripted"

MODES = ("torque_ramp", "unknown_keys", "only_unknown_keys", "out_of_range", "non_finite", "vision_reach")

OPTIONS = frozenset(
    {
        "mode",
        "joint",
        "target",
        "ramp_steps",
        "ramp_s",
        "unknown_keys",
        "out_of_range_keys",
        "out_of_range_margin",
        "end_after_steps",
        "camera",
    }
)

DEFAULT_JOINT = "right.joint_4"
DEFAULT_TARGET_WITHOUT_LIMITS = 1.5
DEFAULT_RAMP_S = 1.0
DEFAULT_CONTROL_FREQUENCY_HZ = 50.0
DEFAULT_UNKNOWN_KEYS = ("left.joint_99", "tool.joint_1")
DEFAULT_OUT_OF_RANGE_MARGIN = 0.5


class ScriptedPolicy:
    """A deterministic script selected by ``mode`` (see the module docstring for each mode).

    Config options (all optional):

    - ``mode`` (default ``torque_ramp``): one of ``MODES``.
    - ``joint`` (str, default ``right.joint_4``): the key ``torque_ramp``/``out_of_range``/``non_finite``
      drive; must be one of the task's action keys.
    - ``target`` (float): ``torque_ramp`` target; default the joint's upper limit, else +1.5 rad.
    - ``ramp_steps`` (int >= 1): actions the ramp takes to reach ``target``; default ``ramp_s`` seconds at the
      task's control frequency. A ramp much faster than ~0.3 s trips the velocity check before the torque one.
    - ``ramp_s`` (float > 0, default 1.0): ramp duration used when ``ramp_steps`` is not given.
    - ``unknown_keys`` (sequence of str, default ``left.joint_99, tool.joint_1``): the keys no actuator has.
    - ``out_of_range_keys`` (sequence of str, or ``"all"``; default ``[joint]``).
    - ``out_of_range_margin`` (float > 0, default 0.5): how far beyond the upper limit.
    - ``end_after_steps`` (int): emit exactly this many actions, then raise ``EndEpisode``; default never.
    - ``action_horizon`` (int >= 1): chunk length; default the task's ``action_horizon``, else 8.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        cfg = opt.check_options(PROVIDER, config, OPTIONS)
        mode = str(cfg.get("mode", "torque_ramp"))
        if mode not in MODES:
            raise ValueError(f"{PROVIDER} policy: mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self._joint = str(cfg.get("joint", DEFAULT_JOINT))
        target = cfg.get("target")
        self._target_option = None if target is None else opt.finite_float(PROVIDER, "target", target)
        self._ramp_steps_option = opt.optional_int(PROVIDER, "ramp_steps", cfg.get("ramp_steps"), minimum=1)
        self._ramp_s = opt.finite_float(PROVIDER, "ramp_s", cfg.get("ramp_s", DEFAULT_RAMP_S))
        if self._ramp_s <= 0.0:
            raise ValueError(f"{PROVIDER} policy: ramp_s must be > 0")
        unknown = cfg.get("unknown_keys", DEFAULT_UNKNOWN_KEYS)
        if isinstance(unknown, (str, bytes)) or not unknown:
            raise ValueError(f"{PROVIDER} policy: unknown_keys must be a non-empty sequence of keys")
        self._unknown_keys = tuple(str(k) for k in unknown)
        out_keys = cfg.get("out_of_range_keys")
        if out_keys is not None and out_keys != "all" and (isinstance(out_keys, (str, bytes)) or not out_keys):
            raise ValueError(f"{PROVIDER} policy: out_of_range_keys must be a sequence of keys or 'all'")
        self._out_keys_option = out_keys
        self._margin = opt.finite_float(
            PROVIDER, "out_of_range_margin", cfg.get("out_of_range_margin", DEFAULT_OUT_OF_RANGE_MARGIN)
        )
        if self._margin <= 0.0:
            raise ValueError(f"{PROVIDER} policy: out_of_range_margin must be > 0")
        self._end_after = opt.optional_int(PROVIDER, "end_after_steps", cfg.get("end_after_steps"))
        self._horizon = opt.optional_int(PROVIDER, "action_horizon", cfg.get("action_horizon"), minimum=1)
        self._task: Mapping[str, Any] | None = None
        self._vision = None
        if mode == "vision_reach":
            from strands_robots.policies.vision_reach import VisionReachPolicy

            self._vision = VisionReachPolicy(camera=str(cfg.get("camera", "scene")),
                                             ramp_s=self._ramp_s if "ramp_s" in cfg else 1.5,
                                             end_after_steps=self._end_after, action_horizon=self._horizon)

    @property
    def target(self) -> float:
        """The ``torque_ramp`` target for the current task (after ``reset``)."""
        return self._target

    def reset(self, task: Mapping[str, Any]) -> None:
        """Start the script over for ``task``.

        :raises ValueError: ``joint`` (or an ``out_of_range`` key) is not among the task's action keys, or
            ``out_of_range`` lacks the joint limits it must exceed.
        """
        if self._vision is not None:
            self._vision.reset(task)
            self._task = task
            return
        keys = opt.action_keys(PROVIDER, task)
        limits = opt.joint_limits(PROVIDER, task)
        if self.mode in ("torque_ramp", "non_finite", "out_of_range") and self._joint not in keys:
            raise ValueError(
                f"{PROVIDER} policy: joint {self._joint!r} is not an action key; valid keys: {', '.join(keys)}"
            )
        if self.mode in ("unknown_keys", "only_unknown_keys"):
            real = [k for k in self._unknown_keys if k in keys]
            if real:
                raise ValueError(f"{PROVIDER} policy: unknown_keys {real} are real action keys of this task")
        if self._ramp_steps_option is not None:
            self._ramp_steps = self._ramp_steps_option
        else:
            freq = float(task.get("control_frequency") or DEFAULT_CONTROL_FREQUENCY_HZ)
            self._ramp_steps = max(1, round(self._ramp_s * freq))
        if self._target_option is not None:
            self._target = self._target_option
        elif self._joint in limits:
            self._target = limits[self._joint][1]
        else:
            self._target = DEFAULT_TARGET_WITHOUT_LIMITS
        out_of_range: dict[str, float] = {}
        if self.mode == "out_of_range":
            chosen = keys if self._out_keys_option == "all" else tuple(self._out_keys_option or (self._joint,))
            missing = [k for k in chosen if k not in keys]
            if missing:
                raise ValueError(
                    f"{PROVIDER} policy: out_of_range_keys {missing} are not action keys; "
                    f"valid keys: {', '.join(keys)}"
                )
            without_limits = [k for k in chosen if k not in limits]
            if without_limits:
                raise ValueError(
                    f"{PROVIDER} policy: out_of_range needs task joint_limits for {', '.join(without_limits)}"
                )
            out_of_range = {k: limits[k][1] + self._margin for k in chosen}
        self._out_of_range = out_of_range
        self._keys = keys
        self._limits = limits
        self._chunk_len = opt.action_horizon(PROVIDER, self._horizon, task)
        self._hold: dict[str, float] | None = None
        self._emitted = 0
        self._task = task

    never_blocks = True  # computes its script's actions (policies.base.NEVER_BLOCKS)

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Return the next ``action_horizon`` actions of the script.

        :raises EndEpisode: ``end_after_steps`` actions were already emitted.
        """
        if self._task is None:
            raise RuntimeError("ScriptedPolicy.act called before reset(task)")
        if self._vision is not None:
            return self._vision.act(observation)
        n = self._chunk_len
        if self._end_after is not None:
            if self._emitted >= self._end_after:
                raise EndEpisode(f"scripted policy ({self.mode}) completed after {self._emitted} actions")
            n = min(n, self._end_after - self._emitted)
        if self._hold is None:
            self._capture(observation)
        assert self._hold is not None
        self._emitted += n
        if self.mode == "torque_ramp":
            chunk = []
            start, target, ramp = self._ramp_start, self._target, self._ramp_steps
            for _ in range(n):
                self._ramp_k += 1
                action = dict(self._hold)
                action[self._joint] = start + (target - start) * min(1.0, self._ramp_k / ramp)
                chunk.append(action)
            return chunk
        return [dict(self._constant) for _ in range(n)]

    def resume(self, observation: Mapping[str, Any]) -> None:
        """After a takeover: hold the arm where the operator left it and start the script from there."""
        if self._task is None:
            raise RuntimeError("ScriptedPolicy.resume called before reset(task)")
        if self._vision is not None:
            self._vision.resume(observation)
            return
        self._capture(observation)

    def _capture(self, observation: Mapping[str, Any]) -> None:
        hold = {k: opt.observed_position(observation, k, self._limits) for k in self._keys}
        self._hold = hold
        self._ramp_start = hold.get(self._joint, 0.0)
        self._ramp_k = 0
        if self.mode == "unknown_keys":
            constant = dict(hold)
            constant.update(dict.fromkeys(self._unknown_keys, 0.0))
        elif self.mode == "only_unknown_keys":
            constant = dict.fromkeys(self._unknown_keys, 0.0)
        elif self.mode == "out_of_range":
            constant = dict(hold)
            constant.update(self._out_of_range)
        elif self.mode == "non_finite":
            constant = dict(hold)
            constant[self._joint] = math.nan
        else:
            constant = hold
        self._constant = constant
