"""The episode procedure end to end, in process, with no ROS and no mocks.

JobRunner over a real simulated station (InProcessRobot on a Simulation / PolicyRunner with a real
LeaseManager) and the ScriptedOperator.
"""

import re

import pytest

from strands_robots.policies.mock import MockPolicy
from strands_robots.policies.registry import register_provider
from strands_robots.station.episode_results import kept_count
from strands_robots.station.episode_steps import CANCELLED_STOP_REASON
from strands_robots.station.episodes import JobRunner
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.ports import INFRASTRUCTURE_ERRORS, InfrastructureFault, RolloutOutcome, fault_of
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.record import JobRecord
from strands_robots.station.status import aggregate

SHEET = [
    {"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"},
    {"name": "grasp", "question": "Grasp?", "answer_type": "choice", "max_points": 2,
     "choices": ["none", "partial", "firm"], "choice_points": [0, 1, 2]},
]


def task(task_id, **parameters):
    return {"task_id": task_id, "instruction": f"do {task_id}", "parameters": parameters, "scoring": SHEET}


def job(*tasks, episodes=None, provider="scripted", config=None, **extra):
    data = {"job_id": "job-test", "client_id": "team", "station_id": "sim_station",
            "episodes_total": episodes or len(tasks), "duration_s": 1.0,
            "policy": {"provider": provider, "config": config if config is not None else
                       {"mode": "torque_ramp", "target": 1.0}},
            "tasks": list(tasks)}
    data.update(extra)
    return job_spec_from_mapping(data)


def run(spec, robot=None, operator=None, **kw):
    robot = robot or InProcessRobot()
    operator = operator or ScriptedOperator()
    snapshots = []
    runner = JobRunner(JobRecord(spec), robot, operator, publish=snapshots.append, **kw)
    try:
        final = runner.run()
    finally:
        if isinstance(operator, ScriptedOperator):
            operator.close()
    return final, runner, robot, snapshots


def test_each_end_condition_comes_from_what_really_ended_the_rollout():
    spec = job(
        task("hold", success_when="end_condition == timeout"),          # target 1.0 is held: budget runs out
        task("finish", **{"policy.end_after_steps": "20"}),              # the policy raises EndEpisode
        task("push", **{"policy.target": "2.0", "duration_s": "3"}),     # torque ramp into the bracket
        task("unreachable", start_pose_timeout_s="0.05"),                # cannot settle in 50 ms
        task("heartbeat", **{"fault.stop_heartbeat_at_s": "0.2", "duration_s": "3"}),
        task("claimed", operator_claim_at_s="0.3"),
    )
    final, _, robot, _ = run(spec)
    assert final.state is JobState.SUCCEEDED
    got = [(e.episode_id, e.task.task_id, e.end_condition) for e in final.episodes]
    assert got == [("ep_0000", "hold", "timeout"), ("ep_0001", "finish", "policy_completed"),
                   ("ep_0002", "push", "safety_stop"), ("ep_0003", "unreachable", "start_pose_unreached"),
                   ("ep_0004", "heartbeat", "lease_lost"), ("ep_0005", "claimed", "authority_lost")]
    by_id = {e.episode_id: e for e in final.episodes}
    assert by_id["ep_0000"].end_detail == ""  # timeout says it all
    assert "completed after 20 actions" in by_id["ep_0001"].end_detail
    assert re.fullmatch(r"(left|right): joint \d reads [+-]\d+\.\d N\*m(; .+)?", by_id["ep_0002"].end_detail)
    assert "not settled within 0.05 s" in by_id["ep_0003"].end_detail
    assert not by_id["ep_0003"].scored and by_id["ep_0003"].run_id == ""  # no rollout ran
    assert "expired" in by_id["ep_0004"].end_detail
    assert "revoked by 'operator:scripted-operator@sim_station'" in by_id["ep_0005"].end_detail
    assert robot.claims and robot.claims[-1].revoked_holder == "station:sim_station"
    # Rollouts that ran have distinct observer run ids.
    run_ids = [e.run_id for e in final.episodes if e.end_condition != "start_pose_unreached"]
    assert len(set(run_ids)) == len(run_ids) and all(run_ids)


def test_lease_lost_episode_stopped_once_the_lease_expired_not_at_the_budget():
    spec = job(task("heartbeat", **{"fault.stop_heartbeat_at_s": "0.2", "duration_s": "3"}))
    final, _, robot, _ = run(spec, settings=ProcedureSettings(lease_duration_s=0.5))
    assert final.episodes[0].end_condition == "lease_lost"
    # 50 Hz, one lease-clock tick of 0.02 s per step: the last renewal is at step 8 (0.18 s), the 0.5 s lease
    # expires at 0.68 s, seen after step 33: 34 actions, far before the 150-step budget.
    assert robot.last_ended["applied_actions"] == 34
    assert robot.last_ended["stopped_reason"] == "cancelled"


def test_taken_over_episode_is_kept_flagged_and_left_out_of_the_rates():
    resumes = []

    class CountingPolicy(MockPolicy):
        def resume(self, observation):
            resumes.append(observation["sim_time_s"])
            super().resume(observation)

    register_provider("station-test-counting", CountingPolicy, replace=True)
    spec = job(task("plain", success_when="end_condition == timeout"),
               task("assisted", operator_takeover_at_s="0.3", success_when="end_condition == timeout"),
               provider="station-test-counting", config={})
    final, runner, robot, _ = run(spec)
    plain, assisted = final.episodes
    assert (plain.taken_over, assisted.taken_over) == (False, True)
    assert assisted.scored and assisted.success and assisted.end_condition == "timeout"
    # Rollout time stood still: the whole 1 s budget (50 steps) still ran after the takeover.
    assert robot.last_ended["applied_actions"] == 50 and robot.last_ended["paused_s"] > 0
    assert len(resumes) == 1  # the policy's resume() ran once, on hand-back
    agg = aggregate(final.episodes)
    assert (agg.finished, agg.taken_over, agg.counted) == (2, 1, 1)
    assert agg.success_rate == 1.0 and agg.mean_score == pytest.approx(plain.score)


def test_discarded_episode_is_left_out_and_its_task_runs_again_as_a_new_id():
    spec = job(task("first", success_when="end_condition == timeout"),
               task("redo", operator_takeover_at_s="0.2", operator_discard="true"),
               task("last", success_when="end_condition == timeout"))
    final, runner, _, snapshots = run(spec)
    assert [(e.episode_id, e.task.task_id) for e in final.episodes] == [
        ("ep_0000", "first"), ("ep_0002", "redo"), ("ep_0003", "last")]
    assert runner.record.discarded == ("ep_0001",)
    assert final.episodes[1].taken_over  # the re-run was taken over too (same task), and kept
    assert all("ep_0001" not in [e.episode_id for e in s.episodes] for s in snapshots)
    assert final.episodes_total == 3 and len(final.episodes) == 3


def test_running_episode_is_never_listed_in_any_snapshot():
    seen = []
    robot = InProcessRobot()
    spec = job(task("a"), task("b", **{"policy.end_after_steps": "5"}), episodes=4)
    holder = {}

    def publish(status):
        running = holder["runner"].record.running if "runner" in holder else None
        seen.append((running.episode_id if running else None, tuple(e.episode_id for e in status.episodes)))

    runner = JobRunner.__new__(JobRunner)
    holder["runner"] = runner
    JobRunner.__init__(runner, JobRecord(spec), robot, ScriptedOperator(), publish=publish)
    final = runner.run()
    assert [e.episode_id for e in final.episodes] == ["ep_0000", "ep_0001", "ep_0002", "ep_0003"]
    running_snapshots = [(r, listed) for r, listed in seen if r is not None]
    assert len(running_snapshots) >= 4
    assert all(r not in listed for r, listed in running_snapshots)
    # Finished episodes appear in execution order, one more at a time.
    counts = [len(listed) for _, listed in seen]
    assert counts == sorted(counts) and counts[-1] == 4


def test_snapshots_carry_the_injected_station_clock():
    ticks = iter(range(10_000, 20_000))
    final, _, _, snapshots = run(job(task("a")), clock_ms=lambda: next(ticks))
    stamps = [s.updated_unix_ms for s in snapshots]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps) and stamps[0] == 10_000
    assert final.updated_unix_ms == stamps[-1]


def test_job_states_follow_the_machine_and_succeeded_does_not_mean_passed():
    final, runner, _, snapshots = run(job(task("fail", success_when="end_condition == policy_completed")))
    states = []
    for s in snapshots:
        if not states or states[-1] != s.state:
            states.append(s.state)
    assert states == [JobState.CREATED, JobState.WAITING_POLICY, JobState.RUNNING, JobState.FINALIZING,
                      JobState.SUCCEEDED]
    assert final.state is JobState.SUCCEEDED and final.episodes[0].scored and not final.episodes[0].success
    assert "success rate 0%" in final.message


class CancellingOperator(ScriptedOperator):
    """A scripted operator whose job is cancelled by the client at a given rollout time."""

    def __init__(self, at_s):
        super().__init__()
        self.at_s = at_s
        self.runner = None

    def rollout_progress(self, plan, t, console):
        if t >= self.at_s and self.runner is not None and not self.runner.cancel_requested:
            self.runner.cancel("client cancelled")


def test_cancel_mid_rollout_stops_it_and_the_job_ends_cancelled_without_the_episode():
    robot = InProcessRobot()
    operator = CancellingOperator(0.3)
    spec = job(task("a", success_when="end_condition == timeout"), task("b", duration_s="5"), episodes=3)
    runner = JobRunner(JobRecord(spec), robot, operator)
    operator.runner = runner
    orig = operator.rollout_progress

    def progress(plan, t, console):  # cancel only during the second episode
        if plan.episode_id == "ep_0001":
            orig(plan, t, console)

    operator.rollout_progress = progress
    final = runner.run()
    assert final.state is JobState.CANCELLED
    assert [e.episode_id for e in final.episodes] == ["ep_0000"]
    assert "client cancelled" in final.message and "ep_0001" in final.message
    assert robot.last_ended["stopped_reason"] == "cancelled"
    assert robot.last_ended["applied_actions"] < 250  # stopped long before its 5 s budget
    assert not runner.cancel("again").ok


def test_a_cancel_mid_rollout_releases_the_lease_saying_so_and_a_finished_episode_releases_it_plainly():
    class Releases(InProcessRobot):
        def __init__(self):
            super().__init__()
            self.reasons = []

        def release_lease(self, stop_reason=""):
            self.reasons.append(stop_reason)
            super().release_lease(stop_reason)

    robot = Releases()
    operator = CancellingOperator(0.3)
    spec = job(task("a", success_when="end_condition == timeout"), task("b", duration_s="5"), episodes=3)
    runner = JobRunner(JobRecord(spec), robot, operator)
    operator.runner = runner
    orig = operator.rollout_progress

    def progress(plan, t, console):  # cancel only during the second episode
        if plan.episode_id == "ep_0001":
            orig(plan, t, console)

    operator.rollout_progress = progress
    final = runner.run()
    assert final.state is JobState.CANCELLED
    # the release after the cancelled rollout says why: real arms then hold and wait for an operator's clear
    assert robot.reasons == ["", CANCELLED_STOP_REASON]
    # simulated arms do not stop on a cancel: the release was a release
    assert not robot.core.stopped


def test_policy_that_cannot_start_fails_the_job_with_the_reason():
    final, _, _, _ = run(job(task("a"), provider="relay", config={}))
    assert final.state is JobState.FAILED
    assert "the policy could not start" in final.message and "relay" in final.message
    assert final.episodes == ()


def test_policy_raising_in_act_is_the_policys_episode_scored_and_never_run_again():
    spec = job(task("ok", **{"policy.end_after_steps": "3"}), task("broken", **{"policy.fail_after_steps": "4"}),
               provider="mock", config={})
    final, runner, robot, _ = run(spec)
    assert final.state is JobState.SUCCEEDED
    assert [(e.episode_id, e.task.task_id, e.end_condition) for e in final.episodes] == [
        ("ep_0000", "ok", "policy_completed"), ("ep_0001", "broken", "policy_error")]
    broken = final.episodes[1]
    assert broken.scored and broken.run_id  # the operator scored it: it is the policy's episode
    assert broken.end_detail == "MockPolicyError: mock policy failed after 4 actions (fail_after_steps)"
    assert robot.last_ended["applied_actions"] == 4
    assert runner.record.next_episode_number == 2  # not run again
    assert aggregate(final.episodes).counted == 2  # and it counts in the rates


def test_rollout_refused_before_it_ran_fails_the_job_naming_the_episode():
    class RefusingRobot(InProcessRobot):
        def run_rollout(self, plan, progress):
            return RolloutOutcome(stopped_reason="error", end_detail="rollout refused: control_frequency 0")

    final, _, _, _ = run(job(task("a")), robot=RefusingRobot())
    assert final.state is JobState.FAILED and final.episodes == ()
    assert "ep_0000" in final.message and "without an end condition" in final.message
    assert "control_frequency 0" in final.message


def test_arms_another_holder_keeps_fail_the_job_after_the_wait_and_no_episode_is_recorded():
    robot = InProcessRobot()
    robot.lease.acquire("maintenance", 50, 30.0)
    final, _, robot, snapshots = run(job(task("a")), robot=robot, settings=ProcedureSettings(lease_wait_s=0.3))
    assert final.state is JobState.FAILED and final.episodes == ()
    assert "could not get the arms within 0.3 s" in final.message and "held by 'maintenance'" in final.message
    assert any("ep_0000 waiting for the arms" in s.message for s in snapshots)
    assert robot.last_ended is None


def test_endless_discards_fail_the_job_at_max_discards():
    class AlwaysDiscard(ScriptedOperator):
        def rollout_ended(self, pending, obs, console):
            console.discard(pending.episode_id)

    spec = job(task("redo", operator_takeover_at_s="0.0", duration_s="0.2"), max_discards=2)
    final, runner, _, _ = run(spec, operator=AlwaysDiscard())
    assert final.state is JobState.FAILED and "max_discards 2" in final.message
    assert runner.record.discarded == ("ep_0000", "ep_0001", "ep_0002") and final.episodes == ()


def test_no_score_sheet_in_time_keeps_the_episode_unscored():
    class SilentOperator(ScriptedOperator):
        def rollout_ended(self, pending, obs, console):
            pass

    final, _, _, _ = run(job(task("a", duration_s="0.2")), operator=SilentOperator(),
                         settings=ProcedureSettings(scoring_timeout_s=0.01))
    episode = final.episodes[0]
    assert not episode.scored and episode.items == () and episode.score == 0.0 and not episode.success


def test_operator_score_false_keeps_an_unscored_episode_out_of_the_rates():
    final, _, _, _ = run(job(task("a", operator_score="false", duration_s="0.2"),
                             task("b", success_when="end_condition == timeout", duration_s="0.2")))
    a, b = final.episodes
    assert not a.scored and a.items == () and b.scored
    agg = aggregate(final.episodes)
    assert agg.counted == 1 and agg.success_rate == 1.0


def test_discard_during_a_takeover_stops_the_rollout_and_reruns_the_task():
    class DiscardMidway(ScriptedOperator):
        def __init__(self):
            super().__init__()
            self.discard_reply = None

        def rollout_progress(self, plan, t, console):
            if plan.attempt == 0 and t >= 0.2 and self.discard_reply is None:
                console.takeover(self.name, "the cube fell")
                self.discard_reply = console.discard(plan.episode_id)

    operator = DiscardMidway()
    robot = InProcessRobot()
    runs = []
    runner = JobRunner(JobRecord(job(task("fragile", duration_s="5", success_when="end_condition == timeout"))),
                       robot, operator, publish=lambda s: runs.append(robot.last_ended))
    final = runner.run()
    assert operator.discard_reply.ok and "its rollout stops" in operator.discard_reply.message
    assert runner.record.discarded == ("ep_0000",)
    assert [(e.episode_id, e.end_condition, e.taken_over) for e in final.episodes] == [("ep_0001", "timeout", False)]
    first = next(r for r in runs if r is not None)
    assert first["stopped_reason"] == "cancelled" and first["applied_actions"] < 250  # stopped, not run out


def test_a_stop_that_arrives_after_a_rollout_ended_does_not_end_the_next_one():
    robot = InProcessRobot()

    class LateDiscard(ScriptedOperator):
        def rollout_ended(self, pending, obs, console):
            robot.stop_rollout("late")  # e.g. a discard that raced the end of the rollout
            super().rollout_ended(pending, obs, console)

    final, _, _, _ = run(job(task("a", success_when="end_condition == timeout", duration_s="0.3"), episodes=2),
                         robot=robot, operator=LateDiscard())
    assert final.state is JobState.SUCCEEDED
    assert [e.end_condition for e in final.episodes] == ["timeout", "timeout"]


def test_an_episode_slot_that_never_yields_a_result_fails_the_job():
    class AlwaysDiscard(ScriptedOperator):
        def rollout_ended(self, pending, obs, console):
            console.discard(pending.episode_id)

    spec = job(task("redo", operator_takeover_at_s="0.0", duration_s="0.2"), max_discards=50)
    final, runner, _, _ = run(spec, operator=AlwaysDiscard(), settings=ProcedureSettings(max_attempts_per_episode=3))
    assert final.state is JobState.FAILED
    assert "attempted 3 times without a result" in final.message and "'redo'" in final.message
    assert runner.record.discarded == ("ep_0000", "ep_0001", "ep_0002")


@pytest.mark.parametrize("kw,words", [
    ({"lease_duration_s": 0.0}, "lease_duration_s"),
    ({"scoring_timeout_s": -1.0}, "scoring_timeout_s"),
    ({"lease_priority": "high"}, "lease_priority"),
    ({"max_attempts_per_episode": 0}, "max_attempts_per_episode"),
    ({"max_infrastructure_retries": -1}, "max_infrastructure_retries"),
    ({"max_infrastructure_retries": True}, "max_infrastructure_retries"),
    ({"policy_attach_timeout_s": 0.0}, "policy_attach_timeout_s"),
    ({"policy_attach_timeout_s": float("inf")}, "policy_attach_timeout_s"),
    ({"infrastructure_backoff_s": -0.1}, "infrastructure_backoff_s"),
    ({"lease_holder": "  "}, "lease_holder"),
])
def test_procedure_settings_refuse_bad_values(kw, words):
    with pytest.raises(ValueError) as info:
        ProcedureSettings(**kw)
    assert words in str(info.value)


def test_lost_policy_session_waits_for_the_policy_again_and_reruns_the_task():
    spec = job(task("a", success_when="end_condition == timeout", duration_s="0.3"),
               task("b", **{"fault.policy_lost_at_s": "0.1", "success_when": "end_condition == timeout",
                            "duration_s": "0.3"}))
    final, runner, _, snapshots = run(spec)
    assert final.state is JobState.SUCCEEDED
    assert [(e.episode_id, e.task.task_id, e.end_condition, e.scored) for e in final.episodes] == [
        ("ep_0000", "a", "timeout", True), ("ep_0001", "b", "infrastructure_fault", False),
        ("ep_0002", "b", "timeout", True)]
    assert "policy session lost at 0.10 s" in final.episodes[1].end_detail and final.episodes[1].run_id
    assert runner.record.interrupted == ()
    states = [s.state for s in snapshots]
    back = states.index(JobState.WAITING_POLICY, states.index(JobState.RUNNING))
    assert "policy session was lost during ep_0001" in snapshots[back].message
    assert JobState.RUNNING in states[back:]


def test_operator_actions_become_the_jobs_progress_message():
    spec = job(task("assisted", operator_takeover_at_s="0.2", success_when="end_condition == timeout",
                    duration_s="0.5"))
    final, _, _, snapshots = run(spec)
    messages = [s.message for s in snapshots]
    took = next(i for i, m in enumerate(messages) if "scripted-operator took over ep_0000" in m)
    back = next(i for i, m in enumerate(messages) if "scripted-operator handed ep_0000 back" in m)
    scored = next(i for i, m in enumerate(messages) if m.startswith("ep_0000 scored"))
    assert took < back < scored
    assert all(snapshots[i].state is JobState.RUNNING for i in (took, back, scored))


# -- the station's own faults and a job that is never served ----------------
class FaultyRobot(InProcessRobot):
    """The in-process station whose infrastructure fails where a test says.

    ``faults`` maps an episode id to how its rollout ends: ``"driver"`` (the rollout runs, then its driver is
    found gone: the rollout's DriverFault error), ``"silent"`` (the policy past its inference deadline),
    ``"rollout"`` (the rollout node died under the goal), ``"lease"`` (the driver is not there to claim the
    arms), ``"raise"`` (the port itself raises mid-rollout, like a goal that cannot be sent).
    """

    def __init__(self, faults):
        super().__init__()
        self.faults = dict(faults)
        self.acquires = 0  # one claim per episode: the n-th claim is episode ep_<n-1>
        self.calls = []

    def acquire_lease(self, holder, priority, duration_s):
        self.acquires += 1
        self.calls.append(("acquire", self.plan_id()))
        if self.faults.get(self.plan_id()) == "lease":
            raise InfrastructureFault("arm driver /station/arm_driver is not ready (waited 10 s)")
        return super().acquire_lease(holder, priority, duration_s)

    def release_lease(self, stop_reason=""):
        self.calls.append(("release", self.plan_id()))
        super().release_lease(stop_reason)

    def stop_rollout(self, reason):
        self.calls.append(("stop", reason))
        super().stop_rollout(reason)

    def plan_id(self):
        return f"ep_{self.acquires - 1:04d}"

    def run_rollout(self, plan, progress):
        how = self.faults.get(plan.episode_id)
        if how == "raise":
            raise ValueError("Value out of range for int64: seed 12345678901234567890")
        outcome = super().run_rollout(plan, progress)  # the rollout really runs (its budget), then the fault
        if how == "driver":
            return RolloutOutcome(stopped_reason="error", error_type="DriverFault", run_id=outcome.run_id,
                                  end_detail="DriverFault: arm driver /station/arm_driver silent for 0.52 s")
        if how == "silent":
            return RolloutOutcome(stopped_reason="error", error_type="InferenceTimeout", run_id=outcome.run_id,
                                  end_detail="InferenceTimeout: policy inference did not finish within 2 s")
        if how == "rollout":
            return RolloutOutcome(stopped_reason="error", infrastructure="the rollout node died under goal "
                                  "1a2b3c4d (its action server was replaced)")
        return outcome

    def wait_for_policy(self, spec, cancelled):
        if spec.job_id.startswith("never"):  # a relay job whose client never attaches
            cancelled.wait(60.0)
            return False, "cancelled while waiting for the policy"
        return super().wait_for_policy(spec, cancelled)


def test_fault_of_tells_the_stations_faults_from_the_policys():
    def outcome(**kw):
        return RolloutOutcome(**{"stopped_reason": "error", "run_id": "run-1", **kw})

    for error_type in sorted(INFRASTRUCTURE_ERRORS):
        assert fault_of(outcome(error_type=error_type)) == "infrastructure", error_type
    assert fault_of(outcome(policy_lost=True)) == "infrastructure"
    assert fault_of(outcome(run_id="", infrastructure="rollout node died")) == "infrastructure"
    from strands_robots.cameras.frames import CameraStale

    # the station's cameras, not the policy: a stale frame is never given to it (seen under load: ep_0000 of the
    # demo job was the policy's error, "CameraStale: camera scene stale: its latest frame is 1.002 s old")
    assert CameraStale.__name__ in INFRASTRUCTURE_ERRORS and "CameraSceneError" in INFRASTRUCTURE_ERRORS
    assert fault_of(outcome(error_type="ValueError")) == "policy"  # a malformed chunk
    assert fault_of(outcome(error_type="UnknownActionKeys")) == "policy"
    assert fault_of(outcome(run_id="", error_type="ValueError")) == ""  # no rollout ran: refused
    assert fault_of(outcome(stopped_reason="budget")) == ""


@pytest.mark.parametrize("how,words", [("driver", "arm driver /station/arm_driver silent"),
                                       ("silent", "InferenceTimeout"),
                                       ("rollout", "rollout node died under goal"),
                                       ("lease", "is not ready")])
def test_station_fault_ends_one_episode_kept_unscored_out_of_the_rates_and_its_task_runs_again(how, words):
    spec = job(task("a", success_when="end_condition == timeout", duration_s="0.2"),
               task("b", success_when="end_condition == timeout", duration_s="0.2"),
               task("c", success_when="end_condition == timeout", duration_s="0.2"))
    robot = FaultyRobot({"ep_0001": how})
    final, runner, _, snapshots = run(spec, robot=robot, settings=ProcedureSettings(infrastructure_backoff_s=0))
    assert final.state is JobState.SUCCEEDED, final.message
    assert [(e.episode_id, e.task.task_id, e.end_condition, e.scored) for e in final.episodes] == [
        ("ep_0000", "a", "timeout", True), ("ep_0001", "b", "infrastructure_fault", False),
        ("ep_0002", "b", "timeout", True), ("ep_0003", "c", "timeout", True)]
    fault = final.episodes[1]
    assert words in fault.end_detail and fault.items == () and fault.score == 0.0 and not fault.success
    agg = aggregate(final.episodes)
    assert (agg.finished, agg.counted, agg.successes) == (4, 3, 3) and agg.success_rate == 1.0
    assert kept_count(final.episodes) == final.episodes_total == 3
    assert "1 more ended by station faults and ran again" in final.message
    # Every id once, in order; the faulted one listed from the snapshot after it ended, never while it ran.
    assert any("ep_0001 ended by a station fault" in s.message for s in snapshots)
    assert runner.record.interrupted == () and runner.record.discarded == ()
    # The lease of every episode that got one was released, the faulted one's included.
    if how != "lease":
        assert ("release", "ep_0001") in robot.calls


def test_faults_on_different_tasks_do_not_add_up_to_the_retry_limit():
    spec = job(task("a", duration_s="0.2"), task("b", duration_s="0.2"), task("c", duration_s="0.2"))
    robot = FaultyRobot({"ep_0000": "driver", "ep_0002": "silent", "ep_0004": "rollout"})
    final, _, _, _ = run(spec, robot=robot, settings=ProcedureSettings(max_infrastructure_retries=1,
                                                                       infrastructure_backoff_s=0))
    assert final.state is JobState.SUCCEEDED, final.message
    assert [(e.episode_id, e.task.task_id, e.end_condition == "infrastructure_fault") for e in final.episodes] == [
        ("ep_0000", "a", True), ("ep_0001", "a", False), ("ep_0002", "b", True), ("ep_0003", "b", False),
        ("ep_0004", "c", True), ("ep_0005", "c", False)]


def test_a_task_ended_by_station_faults_past_the_retry_limit_fails_the_job_naming_the_cause():
    spec = job(task("a", duration_s="0.2"), task("b", duration_s="0.2"))
    robot = FaultyRobot({f"ep_{n:04d}": "driver" for n in range(1, 10)})
    final, runner, _, snapshots = run(spec, robot=robot, settings=ProcedureSettings(max_infrastructure_retries=2,
                                                                                    infrastructure_backoff_s=0.05))
    assert final.state is JobState.FAILED
    assert [(e.episode_id, e.end_condition) for e in final.episodes] == [
        ("ep_0000", "timeout"), ("ep_0001", "infrastructure_fault"), ("ep_0002", "infrastructure_fault"),
        ("ep_0003", "infrastructure_fault")]  # the first run of task b and its 2 re-runs, each kept with its cause
    assert "task 'b'" in final.message and "3 times (max_infrastructure_retries 2)" in final.message
    assert "ep_0003: DriverFault: arm driver /station/arm_driver silent" in final.message
    assert runner.record.next_episode_number == 4
    # Each re-run waited longer than the one before (the pause doubles per fault of the task).
    pauses = [m.split(" in ")[-1] for m in (s.message for s in snapshots) if "runs again as a new episode in" in m]
    assert pauses == ["0.05 s", "0.1 s"], pauses


def test_a_cancel_ends_the_pause_before_a_task_runs_again_at_once():
    import threading

    robot = FaultyRobot({"ep_0000": "driver"})
    runner = JobRunner(JobRecord(job(task("a", duration_s="0.2"))), robot, ScriptedOperator(),
                       settings=ProcedureSettings(infrastructure_backoff_s=60.0))
    done = threading.Event()
    out = {}
    thread = threading.Thread(target=lambda: (out.setdefault("final", runner.run()), done.set()), daemon=True)
    thread.start()
    while "runs again as a new episode in 60 s" not in runner.status().message:
        assert thread.is_alive()
        done.wait(0.01)
    assert runner.cancel("enough").ok
    assert done.wait(10.0)  # not the 60 s pause
    final = out["final"]
    assert final.state is JobState.CANCELLED and [e.end_condition for e in final.episodes] == ["infrastructure_fault"]


def test_a_port_that_raises_mid_rollout_fails_the_job_with_the_error_and_leaves_nothing_busy():
    robot = FaultyRobot({"ep_0001": "raise"})
    spec = job(task("a", duration_s="0.2"), task("b", duration_s="0.2"), episodes=3)
    final, _, _, _ = run(spec, robot=robot)
    assert final.state is JobState.FAILED and [e.episode_id for e in final.episodes] == ["ep_0000"]
    assert "ValueError: Value out of range for int64: seed 12345678901234567890" in final.message
    assert robot.calls[-2:] == [("stop", "station error"), ("release", "ep_0001")]
    assert robot.lease.state().state != "held"  # the arms are free
    # The next job on the same station runs to the end.
    again, _, _, _ = run(job(task("next", duration_s="0.2")), robot=robot)
    assert again.state is JobState.SUCCEEDED and again.episodes[0].end_condition == "timeout"


def test_a_job_never_served_fails_at_its_attach_deadline_and_the_next_job_runs():
    from strands_robots.station.station import Station

    robot = FaultyRobot({})
    operator = ScriptedOperator()
    station = Station("sim_station", robot, operator, settings=ProcedureSettings(policy_attach_timeout_s=0.3))
    never = job(task("a", duration_s="0.2"))
    never = type(never)(**{**never.__dict__, "job_id": "never-served"})
    served = job(task("b", success_when="end_condition == timeout", duration_s="0.2"))
    try:
        assert station.submit(never).accepted and station.submit(served).accepted
        station.start()
        assert station.wait_idle(60.0)
    finally:
        station.stop()
        operator.close()
    first, second = station.status("never-served"), station.status("job-test")
    assert first.state is JobState.FAILED and first.episodes == ()
    assert "no policy client attached within 0.3 s (policy_attach_timeout_s)" in first.message
    assert second.state is JobState.SUCCEEDED and second.episodes[0].success


def test_a_cancel_ends_the_wait_for_a_policy_at_once():
    robot = FaultyRobot({})
    never = job(task("a"))
    never = type(never)(**{**never.__dict__, "job_id": "never-served"})
    runner = JobRunner(JobRecord(never), robot, ScriptedOperator())
    import threading

    done = threading.Event()
    out = {}
    thread = threading.Thread(target=lambda: (out.setdefault("final", runner.run()), done.set()), daemon=True)
    thread.start()
    while runner.status().state is not JobState.WAITING_POLICY:
        assert thread.is_alive()
        done.wait(0.01)
    assert runner.cancel("the team gave up").ok
    assert done.wait(10.0)
    assert out["final"].state is JobState.CANCELLED and "the team gave up" in out["final"].message


def test_a_huge_end_detail_and_the_message_quoting_it_are_cut_to_their_limits_with_a_marker():
    from strands_robots.station.limits import END_DETAIL_MAX, JOB_MESSAGE_MAX

    huge = "x" * (16 * 1024 * 1024)

    class HugeDetailRobot(InProcessRobot):  # a policy error whose text is 16 MiB (a team's exception message)
        def run_rollout(self, plan, progress):
            outcome = super().run_rollout(plan, progress)
            return RolloutOutcome(stopped_reason="error", error_type="ValueError", run_id=outcome.run_id,
                                  end_detail=f"ValueError: {huge}")

    final, _, _, snapshots = run(job(task("a")), robot=HugeDetailRobot())
    assert final.state is JobState.SUCCEEDED
    (episode,) = final.episodes
    assert episode.end_condition == "policy_error"
    assert len(episode.end_detail) <= END_DETAIL_MAX and episode.end_detail.startswith("ValueError: xxx")
    assert "characters cut]" in episode.end_detail
    assert all(len(s.message) <= JOB_MESSAGE_MAX for s in snapshots)
    assert all(len(e.end_detail) <= END_DETAIL_MAX for s in snapshots for e in s.episodes)


def test_a_job_stops_at_the_most_finished_episodes_one_status_carries(monkeypatch):
    import strands_robots.station.episodes as episodes

    monkeypatch.setattr(episodes, "EPISODES_LISTED_MAX", 2)  # the rule, at a size a test can reach
    robot = FaultyRobot({"ep_0000": "driver"})  # a station fault: listed, and its task runs again
    final, runner, _, _ = run(job(task("a", duration_s="0.2"), episodes=3), robot=robot,
                              settings=ProcedureSettings(infrastructure_backoff_s=0))
    assert final.state is JobState.FAILED
    assert [e.end_condition for e in final.episodes] == ["infrastructure_fault", "timeout"]
    assert final.message == ("the job has listed 2 finished episodes, the most one job's status carries "
                             "(EPISODES_LISTED_MAX); 1 of 3 were kept")
    assert runner.record.running is None and robot.lease.state().state != "held"


def test_a_discarded_episode_is_counted_under_its_task_in_the_jobs_summary():
    spec = job(task("first", success_when="end_condition == timeout"),
               task("redo", operator_takeover_at_s="0.2", operator_discard="true"),
               task("last", success_when="end_condition == timeout"))
    final, runner, _, snapshots = run(spec)
    assert runner.record.discarded == ("ep_0001",)
    assert runner.record.unlisted_tasks == (("ep_0001", "redo"),)
    redo = final.summary.task("redo")
    assert redo.coverage.discarded == ("ep_0001",) and redo.coverage.attempted == 2
    assert final.summary.task("first").coverage.discarded == ()
    assert final.summary.coverage.discarded == ("ep_0001",)
