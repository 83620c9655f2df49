"""A comparison episode's goal names no policy: the slot goes sealed for the rollout node, beside the blind label.

The goal's ``policy_config_json`` is built by the station node's own code (``StationPolicyCalls._policy_config``)
and read by the rollout node's own relay provider (``RelayPolicy``) with its own credentials: the slot the
station meant is the one the provider opens, the goal's text holds no slot name, and a goal sealed under another
station's token (or altered) is refused by name.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from strands_robots.nodes.station.policy import RelaySettings, StationPolicyCalls
from strands_robots.policies.relay import RelayPolicy, RelayPolicyLost
from strands_robots.station.comparison import block_plan
from strands_robots.station.job import plan_episode
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station_link.slot_seal import (SEALED_LENGTH, SlotSealError, seal_key, seal_slot,
                                                   unseal_slot)
from strands_robots.wire.credentials import RelayCredentials

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
TOKEN = "station-token-0123456789abcdef"
SLOTS = ("vision_policy_v2", "blind-baseline")


def _credentials(token=TOKEN):
    return RelayCredentials(targets=("127.0.0.1:1",), station_id="sim_station", token=token)


def _goal_configs(job_id="job-seal", blocks=6):
    """Each episode's goal config as the station node builds it, with the slot the station meant."""
    spec = job_spec_from_mapping({
        "job_id": job_id, "client_id": "team", "station_id": "sim_station", "episodes_total": 2 * blocks,
        "policy": {"provider": "relay"}, "compare": {"slots": list(SLOTS), "suite": "s"},
        "tasks": [{"task_id": "reach", "instruction": "reach", "scoring": SHEET, "parameters": {"seed": str(i)}}
                  for i in range(blocks)]})
    node = SimpleNamespace(_relay=RelaySettings("127.0.0.1:1", "sim_station", "", seal_key=seal_key(TOKEN)),
                           _job_id=job_id)
    out = []
    for index in range(blocks):
        block = block_plan(job_id, SLOTS, index)
        for position, slot in enumerate(block.order):
            episode_id = f"ep_{2 * index + position:04d}"
            plan = dataclasses.replace(plan_episode(spec, episode_id, index, 0), compare_slot=slot,
                                       blind_label=block.labels[slot], block_id=block.block_id)
            out.append((StationPolicyCalls._policy_config(node, plan), slot, block.labels[slot]))
    return out


def test_the_goal_carries_the_sealed_slot_and_the_blind_label_and_no_slot_name():
    configs = _goal_configs()
    for config, slot, label in configs:
        text = json.dumps(config)
        assert not any(name in text for name in SLOTS), text
        assert "slot" not in config and config["blind_label"] == label
        assert len(config["sealed_slot"]) == SEALED_LENGTH  # every slot seals to one length
    assert len({c["sealed_slot"] for c, _s, _l in configs}) == len(configs)  # no two episodes share a seal


def test_the_rollout_nodes_provider_opens_the_slot_the_station_meant():
    for config, slot, label in _goal_configs():
        policy = RelayPolicy(config, credentials=_credentials())
        assert policy.slot == slot and policy.shown == f"policy {label}"
        lost = policy._lost(RuntimeError("gone"))
        assert isinstance(lost, RelayPolicyLost) and slot not in str(lost) and f"policy {label}" in str(lost)


def test_a_goal_sealed_under_another_token_or_altered_or_moved_is_refused_by_name():
    config, _slot, _label = _goal_configs()[0]
    with pytest.raises(ValueError, match="sealed_slot of episode 'ep_0000' was not sealed by this station's token"):
        RelayPolicy(config, credentials=_credentials("another-station-token"))
    sealed = config["sealed_slot"]
    flipped = sealed[:5] + ("A" if sealed[5] != "A" else "B") + sealed[6:]
    with pytest.raises(ValueError, match="was not sealed by this station's token"):
        RelayPolicy(dict(config, sealed_slot=flipped), credentials=_credentials())
    with pytest.raises(ValueError, match="was not sealed by this station's token"):  # another episode's seal
        RelayPolicy(dict(config, episode_id="ep_0001"), credentials=_credentials())
    with pytest.raises(ValueError, match="is not a sealed slot"):
        RelayPolicy(dict(config, sealed_slot="vision"), credentials=_credentials())
    with pytest.raises(ValueError, match="slot and sealed_slot are one option"):
        RelayPolicy(dict(config, slot="vision"), credentials=_credentials())


def test_seal_and_unseal_round_trip_every_slot_name_length():
    key = seal_key(TOKEN)
    for slot in ("a", "B.2", "x" * 64):
        sealed = seal_slot(key, "j", "ep_0003", slot)
        assert len(sealed) == SEALED_LENGTH
        assert unseal_slot(key, "j", "ep_0003", sealed) == slot
        with pytest.raises(SlotSealError):
            unseal_slot(key, "j2", "ep_0003", sealed)
    with pytest.raises(SlotSealError):
        seal_slot(key, "j", "e", "x" * 65)
    with pytest.raises(SlotSealError, match="no station token"):
        seal_key("")
