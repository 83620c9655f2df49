"""Operator actions (OperatorConsole) and the ScriptedOperator (station/operator.py).

The console's rules are exercised during real in-process rollouts (InProcessRobot): an operator
implementation that tries every action at the wrong and the right moment records each reply.
"""

import threading

import pytest

from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job import JobSpecError, plan_episode
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState, ScoringSheet
from strands_robots.station.operator import (
    DECISION_CANCELLED,
    OperatorConsole,
    PendingEpisode,
)
from strands_robots.station.record import JobRecord
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.success_predicate import parse_success_predicate

SHEET = [
    {"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"},
    {"name": "blocks", "question": "Blocks?", "answer_type": "count", "max_points": 3, "points_per_unit": 1},
]


def spec(parameters=None, sheet=SHEET, duration_s=1.0):
    return job_spec_from_mapping({
        "job_id": "op-test", "client_id": "team", "station_id": "sim", "episodes_total": 1, "duration_s": duration_s,
        "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "t", "instruction": "do it", "parameters": parameters or {}, "scoring": sheet}]})


class ProbingOperator:
    """Tries each action too early, twice, or malformed, then correctly; keeps every reply."""

    def __init__(self):
        self.log = []
        self.resumed = False

    def note(self, what, reply):
        self.log.append((what, reply.ok, reply.message))

    def episode_started(self, plan, console):
        self.note("takeover before the rollout", console.takeover("ann"))
        self.note("resume before the rollout", console.resume("ann"))

    def rollout_progress(self, plan, t, console):
        if t >= 0.2 and not any(w == "takeover" for w, *_ in self.log):
            self.note("discard before a takeover", console.discard(plan.episode_id))
            self.note("takeover", console.takeover("ann", "adjust the cube"))
            self.note("takeover again", console.takeover("bob"))
            self.note("discard another episode", console.discard("ep_0042"))
            self.note("score during the rollout", console.submit_score_sheet(plan.episode_id, {"done": True}))
            self.note("resume", console.resume("ann"))
            self.note("resume again", console.resume("ann"))

    def rollout_ended(self, pending, obs, console):
        self.note("score another episode", console.submit_score_sheet("ep_9999", {"done": True, "blocks": 1}))
        self.note("incomplete sheet", console.submit_score_sheet(pending.episode_id, {"done": True}))
        self.note("text answers", console.submit_score_sheet(pending.episode_id, [("done", "yes"), ("blocks", "2")]))
        self.note("score twice", console.submit_score_sheet(pending.episode_id, {"done": False, "blocks": 0}))
        self.note("discard after scoring", console.discard(pending.episode_id))


def test_operator_actions_are_refused_out_of_turn_with_reasons_and_accepted_in_turn():
    operator = ProbingOperator()
    final = JobRunner(JobRecord(spec()), InProcessRobot(), operator).run()
    log = {what: (ok, message) for what, ok, message in operator.log}
    assert not log["takeover before the rollout"][0]
    assert "needs a running rollout" in log["takeover before the rollout"][1]
    assert log["resume before the rollout"] == (False, "no takeover is in force")
    assert log["takeover"][0] and "rollout time stands still" in log["takeover"][1]
    assert not log["takeover again"][0] and "already in force" in log["takeover again"][1]
    assert not log["discard before a takeover"][0] and "was not taken over" in log["discard before a takeover"][1]
    assert not log["discard another episode"][0] and "no episode awaits" in log["discard another episode"][1]
    assert not log["score during the rollout"][0]
    assert log["resume"][0] and not log["resume again"][0]
    assert not log["score another episode"][0] and "'ep_9999' does not await" in log["score another episode"][1]
    assert not log["incomplete sheet"][0] and "item 'blocks': not answered" in log["incomplete sheet"][1]
    assert log["text answers"][0]
    assert not log["score twice"][0] and "already decided" in log["score twice"][1]
    assert not log["discard after scoring"][0]
    episode = final.episodes[0]
    assert final.state is JobState.SUCCEEDED and episode.taken_over and episode.scored
    assert [i.answer for i in episode.items] == [True, 2] and episode.score == pytest.approx(3 / 4)


def test_discard_of_an_episode_not_taken_over_is_refused():
    class Discarder(ScriptedOperator):
        def rollout_ended(self, pending, obs, console):
            self.first = console.discard(pending.episode_id)
            super().rollout_ended(pending, obs, console)

    operator = Discarder()
    final = JobRunner(JobRecord(spec(duration_s=0.2)), InProcessRobot(), operator).run()
    assert not operator.first.ok and "was not taken over" in operator.first.message
    assert len(final.episodes) == 1 and final.episodes[0].scored


def test_cancel_ends_a_wait_for_the_score_sheet():
    console = OperatorConsole(InProcessRobot())
    console.begin_episode("ep_0000", ScoringSheet(()))
    console.rollout_ended()
    console.cancel()
    assert console.wait_decision(timeout_s=5.0).kind == DECISION_CANCELLED


def test_console_validates_operator_names():
    console = OperatorConsole(InProcessRobot())
    assert console.takeover(" ").message == "operator_name must be a non-empty string"
    assert not console.claim_arms("").ok


# -- the scripted operator's sheet --------------------------------------------------------------------------------
def plan_for(sheet_items, parameters=None):
    s = spec(parameters, sheet_items)
    return plan_episode(s, "ep_0000", 0)


def test_scripted_answers_follow_the_success_judgement_and_answer_parameters():
    items = [
        {"name": "stack", "question": "Stacked?", "answer_type": "count", "max_points": 4, "points_per_unit": 1,
         "success_answer": "3"},
        {"name": "grip", "question": "Grip?", "answer_type": "choice", "max_points": 1,
         "choices": ["loose", "firm"], "choice_points": [0, 1]},
        {"name": "tidy", "question": "Tidy?", "answer_type": "yes_no", "max_points": 1},
    ]
    operator = ScriptedOperator()
    plan = plan_for(items, {"answer.grip": "firm"})
    assert operator.answers(plan, True) == [("stack", 3), ("grip", "firm"), ("tidy", True)]
    assert operator.answers(plan, False) == [("stack", 2), ("grip", "firm"), ("tidy", False)]


def test_scripted_choice_success_item_picks_the_success_choice_or_another():
    items = [{"name": "result", "question": "Result?", "answer_type": "choice", "max_points": 2,
              "choices": ["dropped", "placed"], "choice_points": [0, 2], "success_answer": "placed"}]
    plan = plan_for(items)
    assert ScriptedOperator().answers(plan, True) == [("result", 1)]
    assert ScriptedOperator().answers(plan, False) == [("result", 0)]


def test_scripted_operator_parameters_are_refused_at_submit_before_anything_moves():
    # the operator's parameters are checked with every other job value at submit (strands_robots.validation)
    with pytest.raises(JobSpecError) as info:
        spec({"operator_takeover_at_s": "soon"})
    assert str(info.value).startswith("tasks[0].parameters['operator_takeover_at_s']: ")
    assert "'soon'" in str(info.value) and "[0, 86400] s" in str(info.value)


def pending(end_condition):
    return PendingEpisode("ep_0000", plan_for(SHEET), end_condition, "", "run", False)


def test_success_predicates_on_end_condition_and_final_state():
    by_end = parse_success_predicate("end_condition in timeout|policy_completed")
    assert by_end(pending("timeout"), {}) and by_end(pending("policy_completed"), {})
    assert not by_end(pending("safety_stop"), {})
    pose = parse_success_predicate("right.joint_4.pos >= 0.95")
    assert pose(pending("timeout"), {"right.joint_4.pos": 1.0})
    assert not pose(pending("timeout"), {"right.joint_4.pos": 0.9})
    assert not pose(pending("timeout"), {})  # a missing key is no success
    with pytest.raises(ValueError) as info:
        parse_success_predicate("__import__('os')")
    assert "neither" in str(info.value)


def test_success_when_on_the_final_joint_position_judges_a_real_rollout():
    # The torque ramp holds right.joint_4 at its 1.0 target: a pose predicate on the final state is met.
    params = {"success_when": "right.joint_4.pos > 0.95"}
    final = JobRunner(JobRecord(spec(params, duration_s=1.0)), InProcessRobot(), ScriptedOperator()).run()
    assert final.episodes[0].end_condition == "timeout" and final.episodes[0].success
    params = {"success_when": "right.joint_4.pos > 1.5"}
    final = JobRunner(JobRecord(spec(params, duration_s=1.0)), InProcessRobot(), ScriptedOperator()).run()
    assert not final.episodes[0].success and final.episodes[0].scored


class RacingOperators(ScriptedOperator):
    """Eight operators press Takeover at the same instant during a real rollout, then one resumes."""

    def __init__(self):
        super().__init__()
        self.takeovers = []
        self.fired = False

    def rollout_progress(self, plan, t, console):
        if t < 0.2 or self.fired:
            return
        self.fired = True
        barrier = threading.Barrier(8)

        def press(i):
            barrier.wait()
            self.takeovers.append(console.takeover(f"op{i}"))

        threads = [threading.Thread(target=press, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winner = next(r.message.split(" ")[0] for r in self.takeovers if r.ok)  # only who took over resumes
        self.resume_reply = console.resume(winner)


def test_simultaneous_takeovers_grant_exactly_one():
    operator = RacingOperators()
    final = JobRunner(JobRecord(spec(duration_s=0.5)), InProcessRobot(), operator).run()
    assert sum(r.ok for r in operator.takeovers) == 1
    assert sum("already in force" in r.message for r in operator.takeovers) == 7
    assert operator.resume_reply.ok
    assert final.episodes[0].taken_over and final.episodes[0].end_condition == "timeout"


@pytest.mark.parametrize("params,words", [
    ({"answer.blocks": "many"}, "answer.blocks='many' refused: a count must be a decimal integer"),
    ({"answer.colour": "red"}, "answer.colour names no item"),
    ({"answer.done": "yes"}, "answered from success_when"),
])
def test_scripted_answer_parameters_are_refused_at_submit(params, words):
    with pytest.raises(JobSpecError) as info:  # checked with every other job value (strands_robots.validation)
        spec(params)
    assert str(info.value).startswith(f"tasks[0].parameters[{next(iter(params))!r}]: ") and words in str(info.value)


class SlowRobot:
    """A robot side whose pause answers only when the test says so (a rollout node slow to answer)."""

    def __init__(self):
        self.asked = threading.Event()
        self.answer = threading.Event()

    def pause_rollout(self):
        self.asked.set()
        assert self.answer.wait(10.0), "the test never let the pause answer"
        return True, "paused"

    def resume_rollout(self):
        return False, "resume_rollout did not answer"

    def claim_arms(self, holder):
        return True, f"{holder} holds the arms"

    def stop_rollout(self, reason):
        return None


def test_a_slow_pause_never_holds_the_console_lock_and_a_handed_off_action_answers_at_once():
    robot, messages = SlowRobot(), []
    console = OperatorConsole(robot, on_action=messages.append)
    console.begin_episode("ep_0000", ScoringSheet(()))
    console.rollout_started()
    replies = []
    waiting = threading.Thread(target=lambda: replies.append(console.takeover("op", "look")), daemon=True)
    waiting.start()
    assert robot.asked.wait(10.0)
    # While the rollout node has not answered, the procedure's calls and other actions are not held up.
    seen = []
    probe = threading.Thread(target=lambda: seen.append((console.episode_id, console.in_takeover)), daemon=True)
    probe.start()
    probe.join(5.0)
    assert seen == [("ep_0000", False)]
    other = console.takeover("other")
    assert (other.ok, other.message) == (False, "op's takeover of ep_0000 is under way; try again once it is "
                                                "answered")
    robot.answer.set()
    waiting.join(10.0)
    assert replies[0].ok and console.in_takeover and messages == [replies[0].message]
    # Handed off (as the station node's service does): the answer comes at once, the outcome as the job's message.
    handed = []
    reply = console.resume("op", hand_off=handed.append)
    assert reply.ok and reply.message == "op's resume of ep_0000 is under way; the job's message says how it went"
    assert console.in_takeover and len(handed) == 1  # nothing asked of the robot yet
    handed[0]()
    assert console.in_takeover  # the rollout node refused: still taken over, and the job's message says why
    assert messages[-1] == "refused: the rollout could not be resumed: resume_rollout did not answer"

    def full(_work):
        raise RuntimeError("8 operator actions already wait for the rollout node")

    refused = console.resume("op", hand_off=full)
    assert (refused.ok, refused.message) == (False, "op's resume could not be started: 8 operator actions already "
                                                    "wait for the rollout node")
    assert console.resume("op", hand_off=handed.append).ok  # the console is not left busy by the refusal
