"""A comparison its stop rule ended early reads as what it is: "14 episodes, stopped at block 7 of 12: a_better".

The job runs through the station core (``JobRunner`` with known-rate slots and the scripted operator); its final
status reaches each renderer as it does in use: the protobuf (``job status``/``watch``, the web page's model) and
the ROS message as the rqt monitor reads it.
"""

from __future__ import annotations

import sys

from known_rate_port import run_comparison
from monitor_helpers import REPO

from strands_robots.client.cli.client_side import status_progress
from strands_robots.client.cli.job_status import format_status
from strands_robots.client.comparison_view import status_early_stop
from strands_robots.relay.store import JobRecord, JobView, Snapshot
from strands_robots.relay.web.view_model import job_page
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.wire.pb_model import job_status_to_pb

sys.path.insert(0, str(REPO / "src" / "rqt_strands_robots"))
from rqt_strands_robots.monitor_model import MonitorModel  # noqa: E402


def _stopped_job(rates, blocks=12, **stop):
    operator = ScriptedOperator()
    try:
        status, _port = run_comparison(rates, 7, operator, blocks, max_blocks=blocks, **stop)
    finally:
        operator.close()
    return status


def _page(status):
    msg = job_status_to_pb(status)
    job = JobRecord(job_id=status.job_id, client_id="team", station_id=status.station_id, request=b"",
                    submitted_unix_ms=1, episodes_total=status.episodes_total)
    view = JobView(job, Snapshot(status.job_id, 2, msg.state, msg.SerializeToString()), None)
    return job_page(view, msg, status.job_id)


def test_an_early_stop_shows_its_episodes_block_of_max_and_verdict_not_a_fraction_of_the_total():
    status = _stopped_job({"vision": 1.0, "blind": 0.0})
    msg = job_status_to_pb(status)
    stop = msg.comparison.stop
    assert status.state is JobState.SUCCEEDED and stop.HasField("stopped_at_block")
    done, block = len(msg.episodes), stop.stopped_at_block
    assert block < 12 and done == 2 * block < msg.episodes_total  # it did stop early
    expected = f"{done} episodes, stopped at block {block} of 12: a_better"
    assert status_early_stop(msg) == expected
    assert status_progress(msg).endswith("] " + expected)
    text = format_status(msg)
    assert expected in text and f"{done}/{msg.episodes_total}" not in text
    page = _page(status)
    assert page.stopped_early == expected
    from strands_robots.conversions.introspection import msg_to_dict
    from strands_robots.conversions.station import station_status_to_msg

    model = MonitorModel()
    model.on_job_status(msg_to_dict(station_status_to_msg(status)))
    assert model.job_text().startswith(f"job {status.job_id}: SUCCEEDED, {expected} — "), model.job_text()


def test_a_comparison_that_ran_every_block_or_has_no_stop_rule_keeps_done_of_total():
    for status in (_stopped_job({"a": 0.5, "b": 0.5}, blocks=4),
                   _stopped_job({"a": 1.0, "b": 0.0}, blocks=4, stop=False)):
        msg = job_status_to_pb(status)
        assert len(msg.episodes) == msg.episodes_total == 8
        assert status_early_stop(msg) == "" and _page(status).stopped_early == ""
        assert status_progress(msg).endswith("] 8/8 episodes")
