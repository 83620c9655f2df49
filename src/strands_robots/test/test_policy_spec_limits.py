"""Every field a policy declares is bounded where the spec is made: client, relay attach, station."""

from __future__ import annotations

import json

import pytest

from strands_robots.client.policy_spec import (
    MAX_METADATA_JSON,
    MAX_SPEC_JSON,
    SPEC_LIMITS,
    ActionRange,
    CameraNeed,
    PolicySpec,
    PolicySpecError,
    spec_from_pb,
    spec_of,
    spec_refusal,
    spec_to_pb,
)
from strands_robots.wire.proto import policy_session_pb2 as ps


def _refused(make, words):
    with pytest.raises(PolicySpecError) as caught:
        make()
    text = str(caught.value)
    assert words in text, text
    assert len(text) < 400, text  # the refusal names the field and sizes; it never echoes megabytes back
    return text


@pytest.mark.parametrize("field", ["action_keys", "observation_keys"])
def test_a_spec_with_too_many_keys_or_a_key_too_long_is_refused_naming_the_field(field):
    many = tuple(f"k{i}" for i in range(100_000))
    _refused(lambda: PolicySpec(**{field: many}),
             f"{field} has 100000 entries; at most {SPEC_LIMITS[field]} are allowed")
    _refused(lambda: PolicySpec(**{field: ("ok", "x" * 4_000_000)}),
             f"{field}[1] is 4000000 characters long; at most {SPEC_LIMITS['name']} are allowed")


def test_every_other_declared_field_is_bounded_naming_the_field():
    _refused(lambda: PolicySpec(source="s" * 4_000_000), "source is 4000000 characters long")
    _refused(lambda: PolicySpec(cameras=tuple(CameraNeed(f"c{i}") for i in range(33))), "cameras has 33 entries")
    _refused(lambda: PolicySpec(cameras=(CameraNeed("n" * 129),)), "cameras[0].name is 129 characters long")
    _refused(lambda: PolicySpec(cameras=(CameraNeed("scene", 1 << 40, 10),)), "cameras[0] must be")
    _refused(lambda: PolicySpec(action_ranges=tuple(ActionRange(f"k{i}", 0.0, 1.0) for i in range(257))),
             "action_ranges has 257 entries")
    _refused(lambda: PolicySpec(action_ranges=(ActionRange("k" * 200, 0.0, 1.0),)),
             "action_ranges[0].key is 200 characters long")
    _refused(lambda: PolicySpec(action_dim=10 ** 9), "action_dim must be an integer in 0..65535")
    _refused(lambda: PolicySpec(metadata={"blob": "m" * (MAX_METADATA_JSON + 1)}), "metadata is")
    # Each field within its own limit, the whole over MAX_SPEC_JSON: refused as a whole.
    keys = tuple("é" * SPEC_LIMITS["name"] for _ in range(SPEC_LIMITS["action_keys"]))
    _refused(lambda: PolicySpec(action_keys=keys), f"characters of JSON in all, more than {MAX_SPEC_JSON}")


def test_the_largest_spec_the_limits_allow_keeps_its_provenance_json_within_the_bound():
    name = SPEC_LIMITS["name"]
    spec = PolicySpec(action_keys=tuple(f"{i:03d}" + "k" * (name // 4) for i in range(SPEC_LIMITS["action_keys"])),
                      source="s" * SPEC_LIMITS["source"], metadata={"m": "v" * (MAX_METADATA_JSON // 2)})
    assert len(json.dumps(spec.to_dict(), sort_keys=True)) <= MAX_SPEC_JSON
    assert spec_from_pb(spec_to_pb(spec)) == spec


def test_a_client_policy_declaring_too_much_is_refused_before_it_attaches():
    class Greedy:
        def spec(self):
            return PolicySpec(action_keys=tuple(f"k{i}" for i in range(100_000)))

    _refused(lambda: spec_of(Greedy()), "action_keys has 100000 entries")


def test_the_relay_and_the_station_refuse_an_oversized_spec_message_before_building_it():
    msg = ps.PolicySpec(action_keys=[f"k{i}" for i in range(100_000)])
    assert "action_keys has 100000 entries" in spec_refusal(msg)
    assert "metadata_json is" in spec_refusal(ps.PolicySpec(metadata_json="{" + " " * (MAX_SPEC_JSON + 1) + "}"))
    assert "source is 4000000 characters long" in spec_refusal(ps.PolicySpec(source="x" * 4_000_000))
    _refused(lambda: spec_from_pb(msg), "action_keys has 100000 entries")
    assert spec_refusal(spec_to_pb(PolicySpec(action_keys=("right.joint_1",)))) == ""
