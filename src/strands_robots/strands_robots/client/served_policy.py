"""A team's own Python policy named on the command line (``strands-eval serve JOB --policy module:Class``).

:func:`load_policy` imports ``module`` (the current directory first on the path, as ``python -m`` does), takes
``Class`` (or any attribute: a class, a factory or an object) and makes it a :class:`~strands_robots.client.Policy`:
a class or a factory is called with no arguments; an object with ``act`` but without ``reset``/``resume`` gets
no-op ones (:class:`ActOnly`). :class:`InferenceDeadline` bounds each ``act``: an answer later than the deadline
ends the episode as the policy's error, naming the deadline, and the policy is never called twice at once.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from typing import Any, Mapping, Optional, Sequence

from strands_robots.client.policy import Policy

__all__ = ["PolicyLoadError", "load_policy", "ActOnly", "InferenceDeadline", "InferenceTimeout", "serve_to_the_end"]

_log = logging.getLogger("strands_robots.client")


class PolicyLoadError(ValueError):
    """``module:Class`` could not be imported or is not a policy (one line saying why)."""


class InferenceTimeout(RuntimeError):
    """The policy's ``act`` did not answer within the deadline (the episode ends as the policy's error)."""


class ActOnly(Policy):
    """A :class:`Policy` around any object with ``act``: its ``reset``, ``resume`` and ``spec`` when it has them.

    :param inner: the object whose ``act(observation)`` returns an action chunk.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property  # type: ignore[override]
    def episode(self) -> Any:
        return getattr(self.inner, "episode", None)

    @episode.setter
    def episode(self, value: Any) -> None:
        try:
            self.inner.episode = value
        except AttributeError:  # an object that takes no attributes (slots): it does not read the episode
            pass

    def reset(self, task: Any) -> None:
        """Call the object's ``reset(task)`` when it has one."""
        if callable(getattr(self.inner, "reset", None)):
            self.inner.reset(task)

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Return the object's ``act(observation)``."""
        return self.inner.act(observation)

    def resume(self, observation: Mapping[str, Any]) -> None:
        """Call the object's ``resume(observation)`` when it has one."""
        if callable(getattr(self.inner, "resume", None)):
            self.inner.resume(observation)

    def spec(self) -> Any:
        """Return the object's ``spec()`` when it has one, else None (nothing declared)."""
        return self.inner.spec() if callable(getattr(self.inner, "spec", None)) else None


class InferenceDeadline(ActOnly):
    """Bound each ``act`` of ``inner`` by ``timeout_s`` seconds.

    ``act`` runs on one worker thread; a call that has not answered within ``timeout_s`` raises
    :class:`InferenceTimeout` (the station ends that episode as the policy's error, with this reason). A later
    call first waits (within the same deadline) for the late one to finish, so the policy never runs twice at once.

    :param inner: the policy (a :class:`Policy` or any object with ``act``).
    :param timeout_s: the deadline of one ``act``, in seconds (> 0).
    """

    def __init__(self, inner: Any, timeout_s: float) -> None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"the inference timeout must be a number of seconds > 0, got {timeout_s!r}")
        super().__init__(inner)
        self.timeout_s = float(timeout_s)
        self._idle = threading.Event()
        self._idle.set()

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Return ``inner.act(observation)``, or raise :class:`InferenceTimeout` after ``timeout_s``."""
        if not self._idle.wait(self.timeout_s):
            raise InferenceTimeout(f"the policy is still computing an earlier answer after the inference timeout "
                                   f"of {self.timeout_s:g} s")
        self._idle.clear()
        result: dict = {}

        def call() -> None:
            try:
                result["chunk"] = self.inner.act(observation)
            except BaseException as exc:  # handed to the caller's thread, raised there
                result["error"] = exc
            finally:
                self._idle.set()

        threading.Thread(target=call, name="policy-act", daemon=True).start()
        if not self._idle.wait(self.timeout_s):
            raise InferenceTimeout(f"the policy did not answer within the inference timeout of {self.timeout_s:g} s")
        if "error" in result:
            raise result["error"]
        return result["chunk"]


def load_policy(spec: str, *, inference_timeout_s: Optional[float] = None) -> Policy:
    """Return the policy ``spec`` names: ``module:Attribute`` (``my_team.policy:MyPolicy``).

    :param spec: ``module:Attribute``; the attribute is a :class:`Policy` subclass, any class or factory whose
        instance has ``act``, or such an object itself.
    :param inference_timeout_s: when given, each ``act`` is bounded by it (:class:`InferenceDeadline`).
    :raises PolicyLoadError: the module cannot be imported, the attribute is missing, or it has no ``act``.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise PolicyLoadError(f"--policy takes module:Class (e.g. my_policy:MyPolicy), got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyLoadError(f"--policy {spec}: cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PolicyLoadError(f"--policy {spec}: {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if isinstance(target, type) or (callable(target) and not callable(getattr(target, "act", None))):
        try:
            policy = target()
        except Exception as exc:
            raise PolicyLoadError(f"--policy {spec}: {attribute}() raised {type(exc).__name__}: {exc}") from None
    else:
        policy = target
    if not callable(getattr(policy, "act", None)):
        raise PolicyLoadError(f"--policy {spec}: {type(policy).__name__} has no act(observation) method")
    if inference_timeout_s is not None:
        return InferenceDeadline(policy, inference_timeout_s)
    return policy if isinstance(policy, Policy) else ActOnly(policy)


def serve_to_the_end(client: Any, job_id: str, policy: Any, *, max_policy_faults: int = 100, on_event: Any = None,
                     reconnect_s: float = 0.0, slot: str = "") -> Any:
    """Serve ``policy`` for the job to its end, attaching again after each episode the policy failed.

    ``EvaluationClient.serve_policy`` reports a policy's exception to the station (that episode ends with the
    error named, as the policy's) and then ends its session; the job goes on with its next episode, so this
    attaches again until the job ends or ``max_policy_faults`` episodes failed. Returns the final ``pb.JobStatus``.

    :param client: an :class:`~strands_robots.client.EvaluationClient`.
    :param job_id: the job whose policy this serves.
    :param policy: the policy (a :class:`Policy`).
    :param max_policy_faults: episodes the policy may fail before this gives up (raising ``PolicyFailed``).
    :param on_event: called with every request the station sends.
    :param reconnect_s: when the relay becomes unreachable, keep attaching for up to this many seconds.
    :param slot: the comparison job's slot this policy serves ("" for a job of one policy).
    """
    from strands_robots.client.errors import PolicyFailed, RelayError

    faults = 0
    while True:
        try:
            return client.serve_policy(job_id, policy, on_event=on_event, reconnect_s=reconnect_s, slot=slot)
        except PolicyFailed as exc:
            faults += 1
            if faults >= max_policy_faults:
                raise
            _log.warning("job %s: episode ended by the policy's error (%s); attaching again for the next", job_id,
                         exc)
            try:
                status = client.get_status(job_id)
            except RelayError:  # no snapshot to judge by: attaching again tells
                continue
            if status.state in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return status
