"""MockPolicy: smooth, seeded sinusoids around the pose the arm starts from.

The default policy of demos and benchmarks, and the test double of the rollout loop: it needs no model, costs
a few microseconds per chunk, and its failure options (``end_after_steps``, ``fail_after_steps``,
``inference_delay_s``, ``keys``, ``values``) let tests drive every end condition of the loop for real.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Mapping, Sequence

import numpy as np

from strands_robots.policies import options as opt
from strands_robots.policies.base import EndEpisode

PROVIDER = "mock"

OPTIONS = frozenset(
    {
        "amplitude",
        "frequency_hz",
        "keys",
        "values",
        "end_after_steps",
        "fail_after_steps",
        "inference_delay_s",
    }
)

# Keep this fraction of each joint's range free at either end, so the motion stays well inside the limits.
LIMIT_MARGIN_FRACTION = 0.1
# With limits known, the amplitude is at most this fraction of the range (a 0.04 m gripper gets 4 mm).
AMPLITUDE_RANGE_FRACTION = 0.1


class MockPolicyError(RuntimeError):
    """Raised by ``MockPolicy.act`` once ``fail_after_steps`` actions were emitted (an inference failure)."""


class MockPolicy:
    """Sinusoidal motion of every action key around the pose observed at the first ``act``.

    Each key ``i`` moves as ``anchor_i + a_i * (sin(w_i * t + p_i) - sin(p_i))``: it starts exactly at the
    observed pose (no jump), with a per-key phase ``p_i`` and a frequency ``w_i`` within ±25 % of
    ``frequency_hz`` drawn from ``seed``, so the same seed always gives the same chunks. ``t`` advances by
    ``1 / task["control_frequency"]`` per action. Values are clipped to stay ``LIMIT_MARGIN_FRACTION`` of the
    range inside ``task["joint_limits"]`` (never further out than the anchor itself).

    Config options (all optional):

    - ``seed`` (int, default 0): phases and frequencies, unless the task gives a ``seed`` (the run's
      ``seed + episode_index``), which wins so every episode of a seeded run has its own, repeatable motion.
    - ``action_horizon`` (int >= 1): chunk length; default the task's ``action_horizon``, else 8.
    - ``amplitude`` (float, default 0.2): amplitude for keys without limits (rad, or the key's unit); keys with
      limits use ``min(amplitude, 0.1 * range)``.
    - ``frequency_hz`` (float, default 0.5): base frequency of the motion.
    - ``keys`` (sequence of str): emit these keys instead of ``task["action_keys"]`` (e.g. unknown keys, to test
      the loop's fail-fast on keys that match no actuator).
    - ``values`` ({key: float}): emit these constant values for these keys in every action, added to the
      emitted keys if absent (e.g. a NaN, or one out-of-range key).
    - ``end_after_steps`` (int): emit exactly this many actions, then raise ``EndEpisode``.
    - ``fail_after_steps`` (int): emit exactly this many actions, then raise ``MockPolicyError``.
    - ``inference_delay_s`` (float, default 0): sleep this long in every ``act`` (slow inference).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        cfg = opt.check_options(PROVIDER, config, OPTIONS)
        seed = cfg.get("seed", 0)
        self._seed = 0 if seed is None else opt.optional_int(PROVIDER, "seed", seed)
        self._horizon = opt.optional_int(PROVIDER, "action_horizon", cfg.get("action_horizon"), minimum=1)
        self._amplitude = opt.finite_float(PROVIDER, "amplitude", cfg.get("amplitude", 0.2), minimum=0.0)
        self._frequency_hz = opt.finite_float(PROVIDER, "frequency_hz", cfg.get("frequency_hz", 0.5), minimum=0.0)
        keys = cfg.get("keys")
        if keys is not None and (isinstance(keys, (str, bytes)) or not keys):
            raise ValueError(f"{PROVIDER} policy: keys must be a non-empty sequence of keys, got {keys!r}")
        self._keys_override = None if keys is None else tuple(str(k) for k in keys)
        values = cfg.get("values") or {}
        if not isinstance(values, Mapping):
            raise ValueError(f"{PROVIDER} policy: values must be a mapping of key to number, got {values!r}")
        # Non-finite values are allowed on purpose: they are how tests send a NaN to the driver.
        self._values = {str(k): float(v) for k, v in values.items()}
        self._end_after = opt.optional_int(PROVIDER, "end_after_steps", cfg.get("end_after_steps"))
        self._fail_after = opt.optional_int(PROVIDER, "fail_after_steps", cfg.get("fail_after_steps"))
        self._delay_s = opt.finite_float(
            PROVIDER, "inference_delay_s", cfg.get("inference_delay_s", 0.0), minimum=0.0
        )
        self._task: Mapping[str, Any] | None = None
        self._emit_keys: tuple[str, ...] = ()
        self._emitted = 0

    @property
    def never_blocks(self) -> bool:
        """Pure computation unless ``inference_delay_s`` makes it sleep (see ``policies.base.NEVER_BLOCKS``)."""
        return self._delay_s <= 0.0

    @property
    def action_keys(self) -> tuple[str, ...]:
        """The keys every action carries (after ``reset``)."""
        return self._emit_keys

    def reset(self, task: Mapping[str, Any]) -> None:
        """Start an episode: re-seed, pick the keys, and forget the previous anchor pose.

        :param task: needs ``action_keys`` (unless ``keys`` was configured); uses ``joint_limits``,
            ``action_horizon``, ``control_frequency`` and ``seed`` when given.
        """
        keys = self._keys_override if self._keys_override is not None else opt.action_keys(PROVIDER, task)
        limits = opt.joint_limits(PROVIDER, task)
        self._limits = limits
        self._chunk_len = opt.action_horizon(PROVIDER, self._horizon, task)
        self._dt = opt.control_period(PROVIDER, task)
        self._motion_keys = keys
        extra = tuple(k for k in self._values if k not in keys)
        self._emit_keys = keys + extra

        task_seed = opt.optional_int(PROVIDER, "task seed", task.get("seed"))
        rng = random.Random(self._seed if task_seed is None else task_seed)
        n = len(keys)
        phase = np.array([rng.uniform(0.0, 2.0 * math.pi) for _ in range(n)])
        omega = np.array([2.0 * math.pi * self._frequency_hz * rng.uniform(0.75, 1.25) for _ in range(n)])
        amplitude = np.full(n, self._amplitude)
        for i, key in enumerate(keys):
            if key in limits:
                lower, upper = limits[key]
                amplitude[i] = min(self._amplitude, AMPLITUDE_RANGE_FRACTION * (upper - lower))
        self._phase = phase
        self._omega = omega
        self._amp = amplitude
        self._sin_phase = np.sin(phase)
        # Column indices and constants of the `values` overrides on motion keys.
        self._override_cols = [(keys.index(k), v) for k, v in self._values.items() if k in keys]
        self._extra_values = [self._values[k] for k in extra]
        self._steps = np.arange(self._chunk_len, dtype=float)
        self._anchor: np.ndarray | None = None
        self._emitted = 0
        self._task = task

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Return the next chunk: ``action_horizon`` actions, fewer right before ``end/fail_after_steps``.

        :raises EndEpisode: ``end_after_steps`` actions were already emitted.
        :raises MockPolicyError: ``fail_after_steps`` actions were already emitted.
        """
        if self._task is None:
            raise RuntimeError("MockPolicy.act called before reset(task)")
        if self._delay_s > 0.0:
            time.sleep(self._delay_s)
        n = self._chunk_len
        if self._fail_after is not None:
            if self._emitted >= self._fail_after:
                raise MockPolicyError(f"mock policy failed after {self._emitted} actions (fail_after_steps)")
            n = min(n, self._fail_after - self._emitted)
        if self._end_after is not None:
            if self._emitted >= self._end_after:
                raise EndEpisode(f"mock policy completed after {self._emitted} actions (end_after_steps)")
            n = min(n, self._end_after - self._emitted)
        if self._anchor is None:
            self._set_anchor(observation)

        t = (self._k + self._steps[:n])[:, None] * self._dt
        values = self._anchor + self._amp * (np.sin(self._omega * t + self._phase) - self._sin_phase)
        np.clip(values, self._lower, self._upper, out=values)
        for col, value in self._override_cols:
            values[:, col] = value
        self._k += n
        self._emitted += n
        keys = self._emit_keys
        extra = self._extra_values
        if extra:
            return [dict(zip(keys, row + extra)) for row in values.tolist()]
        return [dict(zip(keys, row)) for row in values.tolist()]

    def resume(self, observation: Mapping[str, Any]) -> None:
        """After a takeover: restart the motion from the arm's current pose, so no stale command is sent."""
        if self._task is None:
            raise RuntimeError("MockPolicy.resume called before reset(task)")
        self._set_anchor(observation)

    def _set_anchor(self, observation: Mapping[str, Any]) -> None:
        limits = self._limits
        anchor = np.array([opt.observed_position(observation, k, limits) for k in self._motion_keys])
        lower = np.full(len(anchor), -np.inf)
        upper = np.full(len(anchor), np.inf)
        for i, key in enumerate(self._motion_keys):
            if key in limits:
                lo, hi = limits[key]
                margin = LIMIT_MARGIN_FRACTION * (hi - lo)
                # Inside the margin, but never pushing the arm beyond where it already is, nor past a limit.
                lower[i] = max(lo, min(lo + margin, anchor[i]))
                upper[i] = min(hi, max(hi - margin, anchor[i]))
        self._anchor = anchor
        self._lower = lower
        self._upper = upper
        self._k = 0
