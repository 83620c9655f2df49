"""The monitor's model (rqt_strands_robots.monitor_model): folding the streams, without ROS or Qt."""

from __future__ import annotations

import sys

from monitor_helpers import (REPO, ended, episode_dict, job_status_dict, lease_dict, safety_stop_dict, started,
                             step)

try:
    import rqt_strands_robots  # noqa: F401  (installed by colcon)
except ImportError:  # an unbuilt checkout: the package's source tree
    sys.path.insert(0, str(REPO / "src" / "rqt_strands_robots"))

from rqt_strands_robots.monitor_model import MonitorModel  # noqa: E402


def test_event_seq_gaps_are_found_with_the_missing_range_and_counted_as_lost():
    model = MonitorModel()
    model.on_event(started("r1"))
    for seq in (1, 2, 5, 6, 9):
        model.on_event(step("r1", seq, seq - 1))
    view = model.runs["r1"]
    assert view.gaps == [(3, 4), (7, 8)]
    assert view.lost == 4 and model.total_lost() == 4
    assert "2 (4 events lost); missing 3..4; missing 7..8" in model.summary_lines()[-1]


def test_a_run_first_seen_mid_stream_lost_its_beginning_and_a_repeat_is_out_of_order():
    model = MonitorModel()
    model.on_event(step("r2", 3, 2))
    model.on_event(step("r2", 3, 2))
    view = model.runs["r2"]
    assert view.gaps == [(0, 2)] and view.lost == 3 and view.out_of_order == 1
    assert "Started not seen" in model.summary_lines()[0]


def test_resolution_breakdown_observation_age_deadlines_and_hooks_are_folded_from_steps():
    model = MonitorModel()
    model.on_event(started("r3"))
    model.on_event(step("r3", 1, 0))
    model.on_event(step("r3", 2, 1, resolution="partial", unresolved=("left.joint_2",), reasons=("outside_limits",),
                        age=2, missed=True))
    model.on_event(step("r3", 3, 2, resolution="none", unresolved=("left.joint_1", "left.joint_2", "right.joint_1",
                                                                  "right.joint_4"),
                        reasons=("arm_stopped",) * 4, age=1, hook="recording_error"))
    model.on_event(ended("r3", 4, stopped_reason="safety_stop", detail="right: joint 4 reads +3.4 N*m", failures=2,
                         missed=3))
    view = model.runs["r3"]
    assert dict(view.resolutions) == {"full": 1, "partial": 1, "none": 1}
    assert view.full_rate == 1 / 3
    assert (view.age_last, view.age_max, view.age_mean) == (1, 2, 1.0)
    assert view.late_steps == 1
    rows = model.step_rows()
    assert [r.resolution for r in rows] == ["full", "partial", "none"]
    assert rows[1].unresolved == "left.joint_2 (outside_limits)" and rows[1].cells()[4] == "late"
    lines = model.summary_lines()
    assert "full 1, partial 1, none 1, unknown 0; full rate 33.3%" in lines[1]
    assert "1 late steps, 3 deadlines dropped" in lines[3]
    assert "ok 2, recording_error 1" in lines[4]
    assert lines[5] == "observer failures: 2"
    assert lines[-1] == "ended: error, safety_stop — right: joint 4 reads +3.4 N*m"


def test_safety_stop_lists_every_check_and_keeps_the_history():
    model = MonitorModel()
    model.on_safety_stop(safety_stop_dict())
    lines = model.safety_lines()
    assert lines[0] == "SAFETY STOP in force: 2 check(s) tripped"
    assert "right: joint 4 reads +3.4 N*m" in lines[1] and "limit 3" in lines[1]
    assert "left: joint 2 reads -2.6 rad/s" in lines[2]
    model.on_safety_stop({"stopped": False, "checks": [], "detail": ""})
    assert model.safety_lines() == ["arms running (no safety stop in force); 1 earlier stop(s)"]


def test_job_episodes_lease_and_results():
    model = MonitorModel()
    model.on_episode_result(episode_dict("ep_0000", run_id="a"))
    model.on_episode_result(episode_dict("ep_0000", run_id="a"))
    assert len(model.results) == 1 and model.episode_rows()[0][:5] == ("ep_0000", "timeout", "yes", "yes", "0.75")
    model.on_job_status(job_status_dict("job-3", episodes=[
        episode_dict("ep_0000", run_id="a"),
        episode_dict("ep_0001", "safety_stop", scored=False, taken_over=True, detail="right: joint 4 reads +4.5 N*m")]))
    assert model.job_text() == "job job-3: RUNNING, 2/3 episodes — episode 1 running"
    assert model.episode_rows()[1] == ("ep_0001", "safety_stop", "no", "", "", "yes",
                                       "right: joint 4 reads +4.5 N*m")
    model.on_lease_state(lease_dict("operator"))
    assert model.lease_text() == "lease: held, holder operator (priority 10)"


def test_only_the_latest_runs_are_kept():
    model = MonitorModel(max_runs=3)
    for n in range(5):
        model.on_event(started(f"r{n}"))
    assert model.run_order == ["r2", "r3", "r4"] and set(model.runs) == {"r2", "r3", "r4"}
    assert model.current.run_id == "r4"
