"""The preflight's rules (station/preflight.py) and its place in the episode procedure, without ROS.

The answers checked are those a real policy gives: each test's policy is asked by a robot port whose preflight
builds the observation from a real in-process station (InProcessRobot: a Simulation with a real LeaseManager)
and calls the policy's ``reset`` and ``act`` as the relay's client does. The job fails at WAITING_POLICY with
every reason, no lease is taken and no rollout runs.
"""

import math

from strands_robots.client.policy import EndEpisode, Policy
from strands_robots.client.policy_spec import ActionRange, PolicySpec
from strands_robots.station.compatibility import StationSpec
from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.preflight import PreflightAnswer, answer_refusals, camera_refusals
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.provenance import load_station_facts
from strands_robots.station.record import JobRecord
from strands_robots.station.scripted_operator import ScriptedOperator

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
STATION = StationSpec(action_limits={"right.joint_1": (-2.8, 2.8), "right.gripper": (0.0, 0.8)})
RIGHT = [f"right.joint_{i}" for i in range(1, 7)] + ["right.gripper"]


def refusals(chunk, declared=None, offered=()):
    return answer_refusals(PreflightAnswer(chunk=tuple(chunk), offered_keys=tuple(offered)), STATION, declared)


def test_a_fitting_answer_has_no_reason():
    assert refusals([{"right.joint_1": 0.1, "right.gripper": 0.3}] * 3) == []


def test_every_fault_of_an_answer_is_listed_not_just_the_first():
    declared = PolicySpec(action_keys=("right.joint_1", "right.gripper"),
                          action_ranges=(ActionRange("right.gripper", 0.0, 0.4, closed=0.0),))
    out = refusals([{"right.joint_1": math.inf, "right.wrist": 0.0, "right.gripper": 0.6},
                    {"right.joint_1": 3.5}], declared, offered=("right.joint_1", "right.gripper"))
    assert out == [
        "preflight: the policy commands 'right.wrist': no actuator of this station has it (its actuators: "
        "right.joint_1, right.gripper)",
        "preflight: the chunk's steps command different keys: step 0 commands 3, step 1 1 (1 of 2 steps differ from "
        "step 0)",
        "preflight: the policy answered values that are not finite numbers (1: step 0 'right.joint_1' is inf)",
        "preflight: 'right.joint_1': the policy commands 3.5, outside this station's command range [-2.8, 2.8] (the "
        "driver refuses such targets)",
        "preflight: 'right.gripper': the policy commands 0.6, outside the range it declared [0, 0.4]",
    ]


def test_an_answer_without_a_declared_key_or_of_another_count_is_named():
    declared = PolicySpec(action_keys=("right.joint_1", "right.gripper", "right.joint_9"))
    assert refusals([{"right.joint_1": 0.0}], declared) == [
        "preflight: the policy declared it commands 'right.gripper' and its answer does not"]
    # more keys than it declared is no fault: it holds them (the scripted policies command every actuator)
    assert refusals([{"right.joint_1": 0.0, "right.gripper": 0.1}], PolicySpec(action_keys=("right.joint_1",))) == []
    assert refusals([{"right.joint_1": 0.0}], PolicySpec(action_dim=7)) == [
        "preflight: the policy declared 7 actions per step and answered 1 per step"]
    assert refusals([{"right.joint_1": 0.0}], offered=("right.gripper",)) == [
        "preflight: the policy commands 'right.joint_1', which the episode does not offer it"]


def test_an_error_an_end_or_an_empty_chunk_is_the_one_reason():
    station = STATION
    assert answer_refusals(PreflightAnswer(error="it raised KeyError: 'state'"), station) == [
        "preflight: the policy could not answer the station's first observation: it raised KeyError: 'state'"]
    assert answer_refusals(PreflightAnswer(ended="done"), station) == [
        "preflight: the policy ended the episode at its first observation (EndEpisode (done)): it would run no step"]
    assert answer_refusals(PreflightAnswer(chunk=()), station) == [
        "preflight: the policy answered an empty chunk: no action to check"]


class _Task:
    def __init__(self, task_id, **parameters):
        self.task_id, self.parameters = task_id, parameters


def test_every_unknown_camera_of_every_task_is_named_once():
    tasks = [_Task("a", cameras="scene:224x224,top"), _Task("b"), _Task("c", cameras="none"),
             _Task("d", cameras="side,wrist"), _Task("a", cameras="scene:224x224,top")]
    assert camera_refusals(tasks, ("scene", "wrist")) == [
        "task 'a' asks for camera 'top': this station has no such camera (its cameras: scene, wrist)",
        "task 'd' asks for camera 'side': this station has no such camera (its cameras: scene, wrist)"]
    assert camera_refusals([_Task("e", cameras="scene")], ()) == [
        "task 'e' asks for camera 'scene': this station has no such camera (its cameras: none)"]


# -- in the procedure ---------------------------------------------------------------------------------------------
class PreflightRobot(InProcessRobot):
    """The in-process station with a preflight asking ``policy`` as the relay's client does; counts leases."""

    def __init__(self, policy):
        super().__init__()
        self.policy = policy
        self.leases = 0
        self.rollouts = 0
        self.asked = []

    def preflight(self, spec, plan):
        observation = dict(self._backend.observe())
        self.asked.append(sorted(observation))
        try:
            self.policy.reset({"instruction": plan.task.instruction})
            chunk = self.policy.act(observation)
        except EndEpisode as exc:
            return PreflightAnswer(ended=str(exc))
        except Exception as exc:
            return PreflightAnswer(error=f"it raised {type(exc).__name__}: {exc}")
        return PreflightAnswer(chunk=tuple(chunk), offered_keys=tuple(self._backend.action_keys()))

    def acquire_lease(self, holder, priority, duration_s):
        self.leases += 1
        return super().acquire_lease(holder, priority, duration_s)

    def run_rollout(self, plan, progress):
        self.rollouts += 1
        return super().run_rollout(plan, progress)


class Answers(Policy):
    def __init__(self, answer):
        self.answer = answer

    def act(self, observation):
        return self.answer(observation)


def run(policy, tasks=None):
    spec = job_spec_from_mapping({
        "job_id": "job-preflight", "client_id": "team", "station_id": "sim_station", "episodes_total": 1,
        "duration_s": 0.2, "policy": {"provider": "mock"},
        "tasks": tasks or [{"task_id": "hold", "instruction": "hold still", "scoring": SHEET,
                            "parameters": {"success_when": "end_condition == timeout"}}]})
    robot = PreflightRobot(policy)
    operator = ScriptedOperator()
    snapshots = []
    runner = JobRunner(JobRecord(spec), robot, operator, publish=snapshots.append,
                       settings=ProcedureSettings(station_facts=load_station_facts(cameras=["scene", "wrist"])))
    try:
        final = runner.run()
    finally:
        operator.close()
    return final, robot, [s.state for s in snapshots]


def test_a_failed_preflight_fails_the_job_at_waiting_policy_with_every_reason_and_no_lease():
    final, robot, states = run(Answers(lambda obs: [{"right.joint_1": float("nan"), "right.joint_9": 0.0}]))
    assert final.state is JobState.FAILED
    assert states[-2:] == [JobState.WAITING_POLICY, JobState.FAILED] and JobState.RUNNING not in states
    assert "does not fit this station (2 mismatches; no arm moved): 1. preflight: the policy commands " \
           "'right.joint_9': no actuator" in final.message, final.message
    assert "2. preflight: the policy answered values that are not finite numbers (1: step 0 'right.joint_1' is nan)" \
        in final.message
    assert (robot.leases, robot.rollouts, final.episodes) == (0, 0, ())
    assert robot.asked and "right.joint_1.pos" in robot.asked[0]  # asked on the arms' real state


def test_a_raising_policy_and_an_unknown_camera_are_both_named():
    def explode(observation):
        raise KeyError("observation/joint_position")

    tasks = [{"task_id": "top", "instruction": "look", "scoring": SHEET, "parameters": {"cameras": "top"}}]
    final, robot, states = run(Answers(explode), tasks)
    assert final.state is JobState.FAILED and JobState.RUNNING not in states
    assert final.message.endswith(
        "(2 mismatches; no arm moved): 1. task 'top' asks for camera 'top': this station has no such camera (its "
        "cameras: scene, wrist); 2. preflight: the policy could not answer the station's first observation: it "
        "raised KeyError: 'observation/joint_position'"), final.message
    assert (robot.leases, robot.rollouts) == (0, 0)


def test_a_policy_that_answers_rightly_runs_its_episodes():
    final, robot, _ = run(Answers(lambda obs: [{"right.joint_1": float(obs["right.joint_1.pos"])}]))
    assert final.state is JobState.SUCCEEDED, final.message
    assert robot.leases == 1 and len(robot.asked) == 1


# -- a comparison: every slot's declared spec and answer --------------------------------------------------------
class SlotsRobot(PreflightRobot):
    """A comparison's port: each slot declares its own spec and answers its own preflight."""

    serves_slots = True  # each slot has its own policy, its own declared spec and its own answer

    def __init__(self, declared, answers):
        super().__init__(None)
        self.declared = declared
        self.answers = answers

    def attached_policy_spec(self, spec):
        return self.declared[spec.comparison.slots[0]]

    def attached_slot_specs(self, spec):
        return dict(self.declared)

    def preflight(self, spec, plan):
        observation = dict(self._backend.observe())
        return tuple(PreflightAnswer(chunk=tuple(self.answers[slot](observation)), slot=slot,
                                     offered_keys=tuple(self._backend.action_keys()))
                     for slot in spec.comparison.slots)


def run_slots(declared, answers):
    spec = job_spec_from_mapping({
        "job_id": "job-slots", "client_id": "team", "station_id": "sim_station", "episodes_total": 2,
        "duration_s": 0.2, "policy": {"provider": "mock"}, "compare": {"slots": ["vision", "blind"], "suite": "s"},
        "tasks": [{"task_id": "hold", "instruction": "hold still", "scoring": SHEET,
                   "parameters": {"success_when": "end_condition == timeout"}}]})
    robot = SlotsRobot(declared, answers)
    operator = ScriptedOperator()
    try:
        final = JobRunner(JobRecord(spec), robot, operator,
                          settings=ProcedureSettings(station_facts=load_station_facts(cameras=["scene"]))).run()
    finally:
        operator.close()
    return final, robot


def _hold(observation):
    return [{"right.joint_1": float(observation["right.joint_1.pos"])}]


def test_the_gate_checks_the_second_slots_declared_spec_and_names_its_slot():
    fits = PolicySpec(action_keys=("right.joint_1",))
    misfits = PolicySpec(action_keys=("right.joint_9",), cameras=())
    final, robot = run_slots({"vision": fits, "blind": misfits}, {"vision": _hold, "blind": _hold})
    assert final.state is JobState.FAILED and robot.leases == 0 and final.episodes == ()
    assert "(1 mismatch; no arm moved): 1. slot blind: action key 'right.joint_9': no actuator of this station " \
           "has it" in final.message, final.message
    assert "slot vision" not in final.message


def test_each_slots_preflight_answer_is_checked_against_its_own_declared_spec_and_named():
    vision = PolicySpec(action_keys=("right.joint_1",))
    blind = PolicySpec(action_keys=("right.joint_1",),
                       action_ranges=(ActionRange("right.joint_1", 0.5, 0.6),))
    final, robot = run_slots({"vision": vision, "blind": blind},
                             {"vision": _hold, "blind": lambda obs: [{"right.joint_1": 0.0, "right.joint_9": 1.0}]})
    assert final.state is JobState.FAILED and robot.leases == 0, final.message
    reasons = final.message.split("no arm moved): ", 1)[1]
    assert "slot blind: preflight: the policy commands 'right.joint_9': no actuator" in reasons, reasons
    # blind's answer is read against blind's declared range, not the first slot's spec
    assert "slot blind: preflight: 'right.joint_1': the policy commands 0, outside the range it declared [0.5, 0.6]" \
        in reasons, reasons
    assert "slot vision" not in reasons, reasons


def test_a_comparison_whose_slots_all_fit_runs():
    spec = PolicySpec(action_keys=("right.joint_1",))
    final, robot = run_slots({"vision": spec, "blind": None}, {"vision": _hold, "blind": _hold})
    assert final.state is JobState.SUCCEEDED, final.message
    assert robot.leases == 2


def test_a_two_slot_jobs_provenance_names_both_slots_declared_specs_on_the_wire_and_in_its_file():
    import json

    from strands_robots.client.cli.job_status import format_provenance
    from strands_robots.station.job_codec import provenance_from_mapping, provenance_to_mapping
    from strands_robots.wire.pb_model import job_status_from_pb, job_status_to_pb

    vision = PolicySpec(action_keys=("right.joint_1",), action_ranges=(ActionRange("right.joint_1", -2.5, 2.5),))
    blind = PolicySpec(action_keys=("right.joint_1",), action_ranges=(ActionRange("right.joint_1", -2.75, 2.75),))
    final, _robot = run_slots({"vision": vision, "blind": blind}, {"vision": _hold, "blind": _hold})
    assert final.state is JobState.SUCCEEDED, final.message
    recorded = final.provenance
    by_slot = {s.slot: json.loads(s.policy_spec_json) for s in recorded.slot_specs}
    assert [s.slot for s in recorded.slot_specs] == ["vision", "blind"]  # the job's slot order
    assert by_slot == {"vision": vision.to_dict(), "blind": blind.to_dict()}
    assert by_slot["vision"] != by_slot["blind"]
    assert json.loads(recorded.policy_spec_json) == vision.to_dict()  # the first slot's, for older readers

    wire = job_status_to_pb(final)
    assert [(s.slot, json.loads(s.policy_spec_json)) for s in wire.provenance.slot_specs] == [
        ("vision", vision.to_dict()), ("blind", blind.to_dict())]
    assert job_status_from_pb(wire).provenance == recorded
    assert provenance_from_mapping(json.loads(json.dumps(provenance_to_mapping(recorded)))) == recorded
    lines = format_provenance(wire.provenance)
    assert "policy spec of slot vision" in lines and "policy spec of slot blind" in lines, lines
    blind_lines = lines[lines.index("policy spec of slot blind") + 1:]
    assert any(line.startswith("  action_ranges") and "-2.75" in line for line in blind_lines), lines


def test_a_provenance_written_before_slot_specs_reads_with_none_and_prints_its_one_spec():
    from strands_robots.client.cli.job_status import format_provenance
    from strands_robots.station.job_codec import provenance_from_mapping
    from strands_robots.wire.proto import evaluation_pb2 as ev

    older = {"software_version": "0.1.0", "git_revision": "", "config_files": [],
             "policy_spec_json": '{"action_keys": ["right.joint_1"]}'}
    read = provenance_from_mapping(older)
    assert read.slot_specs == () and read.policy_spec_json == older["policy_spec_json"]
    lines = format_provenance(ev.Provenance(policy_spec_json=older["policy_spec_json"]))
    assert lines[-2:] == ["policy spec", '  action_keys    ["right.joint_1"]'], lines


def test_a_running_comparisons_snapshot_names_no_slot_in_its_provenance_until_the_job_ends():
    import dataclasses

    from strands_robots.station.status import snapshot_of

    vision = PolicySpec(action_keys=("right.joint_1",))
    final, _robot = run_slots({"vision": vision, "blind": None}, {"vision": _hold, "blind": _hold})
    assert final.state is JobState.SUCCEEDED, final.message
    spec = job_spec_from_mapping({
        "job_id": "job-slots", "client_id": "team", "station_id": "sim_station", "episodes_total": 2,
        "duration_s": 0.2, "policy": {"provider": "mock"}, "compare": {"slots": ["vision", "blind"], "suite": "s"},
        "tasks": [{"task_id": "hold", "instruction": "hold still", "scoring": SHEET}]})
    running = dataclasses.replace(JobRecord(spec), state=JobState.RUNNING, provenance=final.provenance)
    assert [s.slot for s in final.provenance.slot_specs] == ["vision", "blind"]
    assert snapshot_of(running).provenance.slot_specs == ()
    assert snapshot_of(running).provenance.config_files == final.provenance.config_files
    ended = dataclasses.replace(running, state=JobState.SUCCEEDED)
    assert [s.slot for s in snapshot_of(ended).provenance.slot_specs] == ["vision", "blind"]
