"""What the client prints of a comparison job: the station's own figures, verdict and block order, word for word.

A comparison job runs through the station core (``JobRunner`` with ``KnownRatePort``: slots whose policies succeed
with known rates), crosses the wire (``job_status_to_pb``), and is printed by the client's command line
(``client.cli.comparison_text``, also at the end of ``summary_table``). Each printed figure is checked against the
station's own result.
"""

from __future__ import annotations

import re

from known_rate_port import run_comparison

from strands_robots.client.cli.client_side import summary_table
from strands_robots.client.cli.comparison_text import ORDER_SHOWN, comparison_lines
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.wire import pb_model


def _printed(rates, seed, blocks, **stop):
    status, _ = run_comparison(rates, seed, ScriptedOperator(), blocks, **stop)
    return status, pb_model.job_status_to_pb(status)


def test_the_printed_comparison_is_the_stations_rates_difference_verdict_and_block_order():
    status, msg = _printed({"vision": 1.0, "blind": 0.0}, 5, 8)
    lines = comparison_lines(msg)
    result = status.comparison
    blocks = len(result.blocks)
    assert lines[0] == f"comparison of vision and blind on suite known_rates: {blocks} complete blocks"
    for slot, line in zip(("vision", "blind"), lines[1:3]):
        k = sum(r.success for b in result.blocks for r in b.results if r.slot == slot)
        assert re.match(rf"^  {slot}\s+{k}/{blocks} = \d+ % \[\d+ %, \d+ %\] Wilson 95 %$", line), line
    pair = msg.comparison.pairs[0]
    assert lines[3].startswith(f"  vision - blind: {pair.difference * 100:+.0f} % [{pair.low * 100:+.0f} %, "
                               f"{pair.high * 100:+.0f} %] Newcombe 95 %; exact McNemar p = ")
    stop = result.stop
    assert lines[4] == (f"  verdict {stop.verdict} (stopped at block {stop.stopped_at_block} of at most 8, alpha "
                        f"0.05): {stop.text}")
    assert stop.verdict == "a_better" and stop.stopped_at_block == blocks
    order = lines[5][len("  block order: "):].split("; ")
    expected = [f"{b.block_id} {', '.join(r.slot for r in b.results)}" for b in result.blocks[:ORDER_SHOWN]]
    assert order[:len(expected)] == expected
    if blocks > ORDER_SHOWN:
        assert order[-1] == f"{blocks - ORDER_SHOWN} more"
    assert summary_table(msg).endswith("\n".join(lines))  # job status / watch / serve print it after the table


def test_a_comparison_without_a_stop_rule_prints_no_verdict_and_a_job_of_one_policy_prints_nothing():
    _, msg = _printed({"a": 0.5, "b": 0.5}, 3, 4, stop=False)
    lines = comparison_lines(msg)
    assert lines[0] == "comparison of a and b on suite known_rates: 4 complete blocks"
    assert not any("verdict" in line for line in lines)
    msg.ClearField("comparison")
    assert comparison_lines(msg) == []
