"""``strands-eval``, the client's command line: figures, times, progress, schema, dry run, policies, tokens.

Its figures, times and progress bar, the job file's schema and page, ``submit --dry-run`` refusing as the relay
does, ``serve --policy`` loading, and ``relay tokens add``.

The dry-run cases run against a real relay (in this process, loopback, stopped at the end) that holds a station's
offer; each bad field is both dry-run and sent to the relay, and the two refusals are compared word for word.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time

from pathlib import Path

import pytest

from strands_robots.client.cli.client_side import progress_bar
from strands_robots.client.cli.times import iso_utc
from strands_robots.job_model.job_schema import EXAMPLE_JOB, job_file_markdown, job_schema
from strands_robots.job_model.team_job import TeamJobRefused, team_job_from_mapping

REPO = Path(__file__).resolve().parents[3]


# -- figures, times, progress ------------------------------------------------------------------------------------
def _episode(index, task, *, success=True, scored=True, taken_over=False, end="timeout", score=1.0):
    from strands_robots.station.model import EpisodeResult, Task

    return EpisodeResult(episode_id=f"ep_{index:04d}", end_condition=end, scored=scored, success=success,
                         score=score if scored else 0.0, items=(), task=Task(task, "do it"), taken_over=taken_over,
                         end_detail="")


def test_the_clients_figures_line_is_the_stations_own_text_for_the_same_summary():
    from strands_robots.client.cli import figures_text as text
    from strands_robots.client.cli.figures_text import figures_text
    from strands_robots.station import summary as station
    from strands_robots.wire.pb_model import summary_to_pb

    cases = [
        [],
        [_episode(0, "a")],
        [_episode(0, "a"), _episode(1, "a", success=False, score=0.2), _episode(2, "b", taken_over=True),
         _episode(3, "b", scored=False, end="safety_stop"), _episode(4, "b", end="infrastructure_fault",
                                                                     scored=False)],
        [_episode(i, "a" if i % 3 else "b", success=i % 2 == 0, score=0.1 * i) for i in range(14)],
    ]
    for episodes in cases:
        summary = station.summarize(episodes, discarded=("ep_0099",))
        msg = summary_to_pb(summary)
        assert figures_text(msg) == summary.text()
        assert len(summary.tasks) == len(msg.tasks)
        for task, task_msg in zip(summary.tasks, msg.tasks):
            for name, part in (("rate_text", "success"), ("score_text", "score"), ("coverage_text", "coverage")):
                assert getattr(text, name)(getattr(task_msg, part)) == getattr(station, name)(getattr(task, part))


def test_times_print_as_iso_8601_utc():
    assert iso_utc(0) == "-"
    assert iso_utc(1765032161000) == "2025-12-06T14:42:41Z"


@pytest.mark.parametrize("done, total, text", [
    (0, 8, "[..............................] 0/8 episodes"),
    (4, 8, "[###############...............] 4/8 episodes"),
    (9, 8, "[##############################] 8/8 episodes (+1 re-run)"),
    (11, 8, "[##############################] 8/8 episodes (+3 re-runs)"),
])
def test_the_progress_bar_never_shows_more_than_the_jobs_episodes(done, total, text):
    assert progress_bar(done, total) == text


# -- the schema and its page -------------------------------------------------------------------------------------
def test_docs_job_file_md_is_the_schemas_page():
    assert (REPO / "docs" / "job-file.md").read_text() == job_file_markdown(), \
        "regenerate it: strands-eval schema --markdown > docs/job-file.md"


def _properties(schema, prefix=""):
    for key, prop in schema.get("properties", {}).items():
        yield f"{prefix}{key}", prop
        yield from _properties(prop, f"{prefix}{key}.")
        items = prop.get("items") or {}
        for variant in [items, *items.get("oneOf", [])]:
            yield from _properties(variant, f"{prefix}{key}[].")


def test_every_field_of_the_schema_has_a_description_and_an_example_the_reader_accepts():
    from strands_robots.job_model import team_job

    schema = job_schema()
    fields = dict(_properties(schema))
    assert set(schema["properties"]) == set(team_job._JOB_KEYS)
    assert {p.split(".", 1)[1] for p in fields if p.startswith("tasks[].")} == set(team_job._SUITE_TASK_KEYS)
    assert {p.split(".", 1)[1] for p in fields if p.startswith("free_form[].")} == set(team_job._FREE_FORM_KEYS)
    for path, prop in fields.items():
        assert prop.get("description") and "not described" not in prop["description"], path
        assert prop.get("examples"), path
    job = team_job_from_mapping(EXAMPLE_JOB)
    assert job.episodes == 2 + 1 + 2 and job.choose["control_frequency"] == "50"
    for path in ("tasks[].trials", "free_form[].budget_s", "choose.image_quality", "max_discards"):
        example = fields[path]["examples"][0]
        assert isinstance(example, (int, float)) and not isinstance(example, bool), path


def test_the_schemas_limits_are_the_readers():
    from strands_robots.job_model import team_job

    schema = job_schema()
    fields = dict(_properties(schema))
    assert fields["max_discards"]["maximum"] == team_job.MAX_DISCARDS
    assert fields["tasks[].trials"]["maximum"] == team_job.MAX_EPISODES
    assert fields["intervals"]["enum"] == list(team_job.INTERVAL_METHODS)
    too_long = "x" * (fields["free_form[].instruction"]["maxLength"] + 1)
    with pytest.raises(TeamJobRefused, match="at most 4096"):
        team_job_from_mapping({"station_id": "s", "free_form": [
            {"task_id": "w", "instruction": too_long, "scoring": [{"name": "n"}]}]})
    assert "success_when" in schema["x-refused-keys"] and "operator_*" in schema["x-refused-keys"]


# -- submit --dry-run: the relay's rules and words -----------------------------------------------------------------
def _dry_run(tmp_path, capsys, data, target=None) -> "tuple[int, str]":
    import yaml

    from strands_robots.client.cli import main

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    argv = ["submit", "--dry-run", str(path)] + (["--relay", target] if target else [])
    code = main(argv)
    captured = capsys.readouterr()
    return code, (captured.err.strip() or captured.out.strip())


def _base(**extra):
    return {"station_id": "sim_station", "suite": "demo", "tasks": [{"task": "hold_pose", "trials": 1}], **extra}


# (job file mapping, the same request as the client sends it: (tasks, choose, options))
_ON_THE_WIRE = [
    (_base(tasks=[{"task": "hodl_pose", "trials": 1}]), ([("hodl_pose", 1)], {}, {})),
    (_base(tasks=[{"task": "hold_pose", "trials": 101}]), ([("hold_pose", 101)], {}, {})),
    (_base(tasks=[{"task": "hold_pose", "trials": 60}, {"task": "hold_pose", "trials": 60}]),
     ([("hold_pose", 60), ("hold_pose", 60)], {}, {})),
    (_base(suite="nope"), ([("hold_pose", 1)], {}, {"suite": "nope"})),
    (_base(choose={"control_frequency": 500}), ([("hold_pose", 1)], {"control_frequency": 500}, {})),
    (_base(choose={"image_quality": 200}), ([("hold_pose", 1)], {"image_quality": 200}, {})),
    (_base(choose={"control_frequency": 5}), ([("hold_pose", 1)], {"control_frequency": 5}, {})),
    (_base(max_discards=1001), ([("hold_pose", 1)], {}, {"max_discards": 1001})),
    (_base(intervals="bayes"), ([("hold_pose", 1)], {}, {"intervals": "bayes"})),
]


def test_dry_run_refuses_each_bad_field_with_the_relays_own_words(tmp_path, capsys, monkeypatch):
    from test_relay_harness import CLIENT_TOKENS, running_relay
    from test_relay_job_settings import _offered
    from test_team_job_refused_keys import NEVER_A_TEAMS

    from strands_robots.client import EvaluationClient, InvalidTask

    monkeypatch.setenv("STRANDS_ROBOTS_TOKEN", CLIENT_TOKENS["team_a"])
    cases = list(_ON_THE_WIRE) + [(_base(choose={key: "1"}), ([("hold_pose", 1)], {key: "1"}, {}))
                                  for key in sorted(NEVER_A_TEAMS)]
    compared = 0
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        _offered(relay)
        code, out = _dry_run(tmp_path, capsys, _base(), relay.target)
        assert code == 0 and "station 'sim_station' offers what it names; nothing sent" in out, out
        for data, (tasks, choose, options) in cases:
            code, out = _dry_run(tmp_path, capsys, data, relay.target)
            suite = options.pop("suite", "demo")
            with pytest.raises(InvalidTask) as refused:
                client.submit_suite_job("sim_station", suite, tasks, choose=choose, **options)
            assert (code, out) == (2, f"strands-eval: {refused.value.reason}"), data
            compared += 1
        assert relay.store.open_jobs_for_station("sim_station") == []  # the dry runs sent nothing
    assert compared == len(cases) >= 30


@pytest.mark.parametrize("where", ["job", "suite task", "free-form task"])
def test_dry_run_refuses_a_key_the_wire_cannot_carry_as_the_relays_reader_does(tmp_path, capsys, where):
    """Keys the client never sends (the file's own shape): the message is the job model's, the relay's reader."""
    from test_team_job_refused_keys import NEVER_A_TEAMS, SHEET

    for key in sorted(NEVER_A_TEAMS):
        if where == "job":
            data = _base(**{key: "1"})
        elif where == "suite task":
            data = _base(tasks=[{"task": "hold_pose", "trials": 1, key: "1"}])
        else:
            data = {"station_id": "s", "free_form": [{"task_id": "w", "instruction": "wave", "scoring": SHEET,
                                                      key: "1"}]}
        with pytest.raises(TeamJobRefused) as refused:
            team_job_from_mapping(data)
        code, out = _dry_run(tmp_path, capsys, data)
        assert (code, out) == (2, f"strands-eval: {refused.value}") and repr(key) in out


def test_dry_run_without_a_token_checks_the_file_alone_and_says_so(tmp_path, capsys, monkeypatch):
    for name in ("STRANDS_ROBOTS_TOKEN", "STRANDS_ROBOTS_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    code, out = _dry_run(tmp_path, capsys, _base(tasks=[{"task": "hold_pose", "trials": 3}]))
    assert code == 0 and "a valid job of 3 episode(s)" in out and "not checked against the station's offer" in out


def test_strands_eval_refuses_a_token_on_the_command_line_naming_itself(capsys):
    from strands_robots.client.cli import main

    assert main(["status", "--token", "secret-value", "job-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("strands-eval: --token is refused") and "secret-value" not in err


# -- serve --policy module:Class -----------------------------------------------------------------------------------
def test_a_policy_named_module_class_loads_and_an_act_only_class_is_adapted(tmp_path, monkeypatch):
    from strands_robots.client import Policy
    from strands_robots.client.served_policy import ActOnly, PolicyLoadError, load_policy

    (tmp_path / "team_policies.py").write_text(
        "from strands_robots.client import Policy\n"
        "class Sub(Policy):\n    def act(self, observation):\n        return [{'a': observation['x'] + 1}]\n"
        "class Bare:\n    def __init__(self):\n        self.resets = []\n"
        "    def act(self, observation):\n        return [{'a': 2 * observation['x']}]\n"
        "class NoAct:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sub = load_policy("team_policies:Sub")
    assert type(sub).__name__ == "Sub" and sub.act({"x": 1}) == [{"a": 2}]
    bare = load_policy("team_policies:Bare")
    assert isinstance(bare, ActOnly) and isinstance(bare, Policy)
    bare.episode = "ep"
    bare.reset({"instruction": "x"})
    bare.resume({})
    assert bare.act({"x": 3}) == [{"a": 6}] and bare.inner.episode == "ep" and bare.spec() is None
    for spec, words in (("team_policies:NoAct", "has no act(observation)"), ("team_policies:Gone", "has no 'Gone'"),
                        ("no_such_module_here:X", "cannot import"), ("team_policies", "module:Class")):
        with pytest.raises(PolicyLoadError, match=re.escape(words)):
            load_policy(spec)


def test_an_answer_later_than_the_inference_timeout_ends_the_step_and_the_policy_never_runs_twice_at_once():
    from strands_robots.client.served_policy import InferenceDeadline, InferenceTimeout

    release = threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    class Slow:
        def act(self, observation):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            try:
                if observation["slow"]:
                    release.wait(10)
                return [{"a": 1.0}]
            finally:
                with lock:
                    running[0] -= 1

    policy = InferenceDeadline(Slow(), 0.2)
    assert policy.act({"slow": False}) == [{"a": 1.0}]
    started = time.monotonic()
    with pytest.raises(InferenceTimeout, match="within the inference timeout of 0.2 s"):
        policy.act({"slow": True})
    assert time.monotonic() - started < 5
    with pytest.raises(InferenceTimeout, match="still computing an earlier answer"):
        policy.act({"slow": False})
    release.set()
    assert policy.act({"slow": False}) == [{"a": 1.0}]
    assert most[0] == 1
    with pytest.raises(ValueError):
        InferenceDeadline(Slow(), 0)


# -- relay tokens add ----------------------------------------------------------------------------------------------
def test_tokens_add_writes_private_entries_the_relay_and_the_station_read_and_refuses_duplicates(tmp_path):
    from strands_robots.relay.auth import TokenBook
    from strands_robots.relay.token_entries import main
    from strands_robots.wire.credentials import load_relay_credentials

    tokens = tmp_path / "tokens.yaml"
    assert main(["add", "team_a", "--client", "--tokens", str(tokens)]) == 0
    assert main(["add", "lab_1", "--station", "--tokens", str(tokens), "--relay-address", "relay.x:50051"]) == 0
    book = TokenBook.from_file(tokens)
    assert book.clients == {"team_a"} and book.stations == {"lab_1"}
    token_file, credentials = tmp_path / "team_a.token", tmp_path / "lab_1.credentials.yaml"
    for path in (tokens, token_file, credentials):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    principal = book.identify(token_file.read_text().strip())
    assert (principal.kind, principal.name) == ("client", "team_a")
    station = load_relay_credentials(credentials)
    assert (station.target, station.station_id) == ("relay.x:50051", "lab_1")
    assert book.identify(station.token).name == "lab_1"
    before = tokens.read_bytes()
    assert main(["add", "team_a", "--station", "--tokens", str(tokens)]) == 2
    from strands_robots.cli import main as strands_robots

    assert strands_robots(["relay", "tokens", "add", "team_b", "--client", "--tokens", str(tokens), "--out",
                           str(tmp_path / "elsewhere")]) == 0
    assert stat.S_IMODE(os.stat(tmp_path / "elsewhere" / "team_b.token").st_mode) == 0o600
    assert main(["add", "bad name", "--client", "--tokens", str(tokens)]) == 2
    assert TokenBook.from_file(tokens).clients == {"team_a", "team_b"}
    tokens.chmod(0o644)  # a tokens file the relay would refuse is refused here too, and left as it was
    after = tokens.read_bytes()
    assert main(["add", "team_c", "--client", "--tokens", str(tokens)]) == 2
    assert tokens.read_bytes() == after and before != after
    assert not (tmp_path / "team_c.token").exists()


def test_serve_policy_module_class_serves_every_episode_and_attaches_again_after_one_its_policy_failed(
        tmp_path, monkeypatch, capsys):
    """``strands-eval serve JOB --policy module:Class`` against a real relay, the station's side on a StationLink."""
    from test_openpi_relay import attached_session
    from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay, wait_until, yes_no_task

    from strands_robots.client import EvaluationClient, pb
    from strands_robots.client.cli import main
    from strands_robots.station_link.link import StationLink
    from strands_robots.station_link.session import RemotePolicyError

    (tmp_path / "team_doubler.py").write_text(
        "class Doubler:\n    def act(self, observation):\n"
        "        if observation['x'] < 0:\n            raise ValueError('negative x')\n"
        "        return [{'right.joint_1': 2 * observation['x']}]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STRANDS_ROBOTS_TOKEN", CLIENT_TOKENS["team_a"])
    jobs, served = [], {}
    with running_relay(tmp_path) as relay:
        link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append,
                           heartbeat_s=0.2).start()
        try:
            client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
            wait_until(lambda: jobs, timeout_s=30, what="the job at the station")
            cli = threading.Thread(target=lambda: served.setdefault("rc", main(
                ["serve", job_id, "--relay", relay.target, "--policy", "team_doubler:Doubler",
                 "--inference-timeout", "10"])), daemon=True)
            cli.start()
            chunks = []
            for episode_id, x in (("ep_0000", -1.0), ("ep_0001", 0.25)):
                session = attached_session(link, job_id)
                session.start_episode(episode_id, jobs[0].tasks[0], action_keys=["right.joint_1"],
                                      control_frequency=50.0, action_horizon=1)
                try:
                    chunks.append(session.act({"x": x}))
                except RemotePolicyError as exc:
                    chunks.append(str(exc))
                    session.end_episode(episode_id, pb.END_POLICY_ERROR, "the policy raised")
                else:
                    session.end_episode(episode_id, pb.END_TIMEOUT)
                session.close()
            status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=pb.JOB_SUCCEEDED, episodes_total=2,
                                  updated_unix_ms=int(time.time() * 1000))
            link.report(status)
            cli.join(60)
        finally:
            link.close()
    assert not cli.is_alive() and served["rc"] == 0, capsys.readouterr()
    assert "ValueError: negative x" in chunks[0]
    assert chunks[1] == [{"right.joint_1": 0.5}]
    out = capsys.readouterr().out
    assert f"job {job_id} SUCCEEDED" in out and "serving team_doubler:Doubler" in out
