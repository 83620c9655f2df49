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


def test_the_clients_end_condition_names_are_the_stations_own():
    from strands_robots.client import pb
    from strands_robots.rollout import end_condition

    assert pb.END_CONDITIONS == end_condition.END_CONDITIONS
    assert pb.STATION_END_CONDITIONS == end_condition.STATION_END_CONDITIONS
    assert (pb.END_POLICY_ERROR, pb.END_INFRASTRUCTURE_FAULT) == (
        end_condition.END_POLICY_ERROR, end_condition.END_INFRASTRUCTURE_FAULT)
