"""The rollout's stopped_reason mapped onto the station's end conditions."""

from strands_robots.rollout.end_condition import END_CONDITIONS, end_condition_for, end_condition_of_result


def test_budget_is_timeout_and_policy_end_is_policy_completed():
    assert end_condition_for("budget") == "timeout"
    assert end_condition_for("policy_completed") == "policy_completed"
    assert end_condition_for("safety_stop") == "safety_stop"


def test_cancel_names_lease_lost_or_authority_lost_only_when_the_stop_said_so():
    assert end_condition_for("cancelled", cancel_reason="lease_lost") == "lease_lost"
    assert end_condition_for("cancelled", cancel_reason="authority_lost") == "authority_lost"
    assert end_condition_for("cancelled", cancel_reason="goal cancelled") == ""
    assert end_condition_for("error") == ""


def test_result_dict_maps_through_its_end_detail():
    assert end_condition_of_result({"stopped_reason": "cancelled", "end_detail": "lease_lost"}) == "lease_lost"
    assert end_condition_of_result({"stopped_reason": "budget", "end_detail": ""}) == "timeout"
    assert set(END_CONDITIONS) >= {"timeout", "start_pose_unreached"}
