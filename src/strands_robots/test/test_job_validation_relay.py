"""Every job value is checked once, at submit, by the station's rules, through a real relay.

The relay runs as its own process (``python -m strands_robots.relay``, a 0600 tokens file, loopback) and the
Evaluation Client submits: the late-limit jobs (duration_s 1e9, control_frequency 5000, operator_takeover_at_s -1,
start-pose tolerance 1e9), the typo job (duraton_s), a 20-digit seed, episodes -1 and 2^32 and a 16 KiB
instruction are all refused at ``submit_job`` with ``InvalidTask`` naming the task index, the key, the value and
the allowed range, and nothing is stored. The same job is refused with the same reason by ``Station.submit`` and
by the rollout's ``validate_run`` (the task a RunEpisode goal carries): one module, three callers.
"""

from __future__ import annotations

import os

import pytest
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, free_port, start_relay_process, stop_process

from strands_robots import validation as rules
from strands_robots.client import EvaluationClient, InvalidTask, NotFound
from strands_robots.rollout.run_spec import RunRefused, validate_run
from strands_robots.station.task_parameters import check_task_parameters
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job import JobSpec
from strands_robots.station.job_file import task_from_mapping
from strands_robots.job_model.team_keys import TASK_PARAMETER, team_key_refusal
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.station import Station

STATION = "sim_station"
SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]

# (parameters of tasks[1], its key, what the range says); tasks[0] is always valid
BAD_JOBS = [
    ({"duration_s": "1e9"}, "duration_s", "allowed range (0, 86400] s"),
    ({"control_frequency": "5000"}, "control_frequency", "allowed range (0, 2000] Hz"),
    ({"operator_takeover_at_s": "-1"}, "operator_takeover_at_s", "allowed range [0, 86400] s"),
    ({"start_pose_tolerance_rad": "1e9"}, "start_pose_tolerance_rad", "allowed range (0, 0.5] rad"),
    ({"duraton_s": "3"}, "duraton_s", "duraton_s='3' refused: unknown task parameter 'duraton_s' (did you mean "
                                      "'duration_s'?); known: "),
    ({"seed": "12345678901234567890"}, "seed", "allowed range [0, 4294967295]"),
]
IDS = [next(iter(p)) for p, _, _ in BAD_JOBS]
# A team never sets these (the station's suite files do: job_model.team_keys); the relay refuses them as such
# before any range check, so only the station and the rollout, which read the suite's values, check their ranges.
STATION_ONLY = {key for _, key, _ in BAD_JOBS if team_key_refusal(key, TASK_PARAMETER)}
TEAM_JOBS = [job for job in BAD_JOBS if job[1] not in STATION_ONLY]
TEAM_IDS = [next(iter(p)) for p, _, _ in TEAM_JOBS]


def task(task_id: str, parameters=None, instruction: str = "hold the wrist steady") -> dict:
    return {"task_id": task_id, "instruction": instruction, "parameters": dict(parameters or {}), "scoring": SHEET}


def job_tasks(parameters) -> list:
    return [task("ok", {"duration_s": "1"}), task("bad", parameters)]


def module_reason(parameters) -> "tuple[str, str]":
    """Return the validation module's own (field, reason) for these parameters: what every caller must say."""
    with pytest.raises(rules.ValueRefused) as info:
        check_task_parameters(parameters)
    return info.value.field, info.value.reason


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    """Yield the target of a relay process (its own store and a 0600 tokens file); end it by PID after."""
    directory = tmp_path_factory.mktemp("relay")
    tokens = directory / "tokens.yaml"
    lines = ["clients:"] + [f"  {k}: {v}" for k, v in CLIENT_TOKENS.items()]
    lines += ["stations:"] + [f"  {k}: {v}" for k, v in STATION_TOKENS.items()]
    fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    port = free_port()
    proc = None
    try:
        proc = start_relay_process(port, f"sqlite:{directory / 'relay.db'}", tokens)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture
def client(relay):
    c = EvaluationClient(relay, token=CLIENT_TOKENS["team_a"], timeout_s=15.0)
    try:
        yield c
    finally:
        c.close()


def refused_by_relay(client, tasks, episodes=2, job_id="job-refused-1") -> InvalidTask:
    with pytest.raises(InvalidTask) as info:
        client.submit_job(station_id=STATION, tasks=tasks, episodes=episodes, job_id=job_id)
    with pytest.raises(NotFound):  # nothing was stored
        client.get_status(job_id)
    return info.value


def test_a_valid_job_is_accepted_by_the_same_relay(client):
    tasks = [task("ok", {"duration_s": "1", "control_frequency": "2000"})]
    job_id = client.submit_job(station_id=STATION, tasks=tasks, episodes=6, job_id="job-accepted-1")
    assert job_id == "job-accepted-1" and client.get_status(job_id).episodes_total == 6


@pytest.mark.parametrize("parameters, key, allowed", TEAM_JOBS, ids=TEAM_IDS)
def test_late_limit_and_typo_jobs_are_refused_at_submit_naming_task_key_value_and_range(client, parameters, key,
                                                                                       allowed):
    err = refused_by_relay(client, job_tasks(parameters))
    assert err.code == "INVALID_ARGUMENT"
    value = parameters[key]
    assert err.reason.startswith(f"tasks[1].parameters[{key!r}]: "), err.reason
    assert repr(value) in err.reason and allowed in err.reason
    if key == "duraton_s":
        assert "duration_s" in err.reason and "operator_takeover_at_s" in err.reason  # the known keys listed


@pytest.mark.parametrize("entry", ["relay", "station", "rollout"])
@pytest.mark.parametrize("parameters, key, allowed", BAD_JOBS, ids=IDS)
def test_the_same_job_is_refused_identically_by_relay_station_and_rollout(relay, entry, parameters, key, allowed):
    field, reason = module_reason(parameters)
    assert field == f"parameters[{key!r}]" and allowed in reason
    tasks = job_tasks(parameters)
    if entry == "relay" and key in STATION_ONLY:
        c = EvaluationClient(relay, token=CLIENT_TOKENS["team_a"], timeout_s=15.0)
        try:
            said = refused_by_relay(c, tasks, job_id=f"job-same-{key}").reason
        finally:
            c.close()
        assert said.startswith(f"tasks[1].{field}: {key!r} refused: "), said  # a team may not set it at all
    elif entry == "relay":
        c = EvaluationClient(relay, token=CLIENT_TOKENS["team_a"], timeout_s=15.0)
        try:
            said = refused_by_relay(c, tasks, job_id=f"job-same-{key}").reason
        finally:
            c.close()
        assert said == f"tasks[1].{field}: {reason}"
    elif entry == "station":
        station = Station(STATION, InProcessRobot(), ScriptedOperator())
        try:
            spec = JobSpec(job_id="job-station-1", client_id="team_a", station_id=STATION, episodes_total=2,
                           tasks=tuple(task_from_mapping(t, i) for i, t in enumerate(tasks)), policy_provider="relay")
            reply = station.submit(spec)
            assert not reply.accepted and station.status("job-station-1") is None
        finally:
            assert station.stop(timeout_s=30.0)
        assert reply.message == f"job refused: tasks[1].{field}: {reason}"
    else:  # the rollout: the task of the RunEpisode goal the station would send for tasks[1]
        bad = tasks[1]
        with pytest.raises(RunRefused) as info:
            validate_run(task={"task_id": bad["task_id"], "layout": "", "parameters": bad["parameters"]})
        assert info.value.field == f"task.{field}" and info.value.reason == reason


def test_a_20_digit_seed_is_refused_at_submit_not_at_the_goal_send(client):
    # the RunEpisode goal's seed is int64: 12345678901234567890 would not fit it; a team's job never carries a seed
    # (trial i runs on its suite task's seed i), so the relay refuses it before it is stored
    err = refused_by_relay(client, [task("seeded", {"seed": "12345678901234567890"})])
    assert err.reason.startswith("tasks[0].parameters['seed']: 'seed' refused: seeds come from the station's suite"), \
        err.reason


@pytest.mark.parametrize("episodes", [-1, 0, 2**32, 100_001])
def test_an_episode_count_out_of_range_is_invalid_task_at_the_relay(client, episodes):
    err = refused_by_relay(client, [task("ok")], episodes=episodes)  # not a ValueError in the client
    assert err.reason == (f"episodes: episodes={episodes} refused: allowed range [1, 100000]: an integer >= 1 and "
                          f"<= 100000 ({rules.JOB_LIMITS['episodes_total'].description})")


def test_a_16_kib_instruction_is_refused_at_submit_naming_the_limit(client):
    err = refused_by_relay(client, [task("ok"), task("long", instruction="a" * 16384)])
    assert err.reason == "tasks[1].instruction: instruction is 16384 characters long; at most 4096 are allowed"


def test_a_malformed_sheet_is_refused_at_submit_with_its_reason(client):
    sheet = SHEET + [{"name": "grip", "question": "Grip?", "answer_type": "choice", "max_points": 1,
                      "choices": ["a", "b"], "choice_points": [0, 5]}]
    err = refused_by_relay(client, [dict(task("ok"), scoring=sheet)])
    assert err.reason == "tasks[0].scoring: item 'grip': choice 'b' earns 5.0 points; each must be in [0, max_points=1]"
