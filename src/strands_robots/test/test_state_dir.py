"""A station's state directory is keyed by the station AND the relay its jobs come from (station/state_dir.py)."""

from __future__ import annotations

import os

import pytest

from strands_robots.station.state_dir import SUBMIT_JOB_DIR, relay_key, state_base, station_state_dir


def test_the_same_station_on_the_same_relay_gets_the_same_directory_and_another_relay_another(tmp_path):
    base = str(tmp_path)
    first = station_state_dir("lab_1", "relay.example.org:50051", base)
    assert station_state_dir("lab_1", "relay.example.org:50051", base) == first
    assert os.path.dirname(first) == os.path.join(base, "lab_1")
    others = {station_state_dir("lab_1", "relay.example.org:50052", base),
              station_state_dir("lab_1", "127.0.0.1:50051", base),
              station_state_dir("lab_2", "relay.example.org:50051", base),
              station_state_dir("lab_1", None, base)}
    assert first not in others and len(others) == 4


def test_a_cluster_is_one_relay_whatever_the_order_of_its_addresses():
    assert relay_key(["b.example:1", "a.example:1"]) == relay_key("a.example:1,b.example:1") == relay_key(
        ("a.example:1", " b.example:1 "))
    assert relay_key("a.example:1") != relay_key("a.example:1,b.example:1")


def test_a_relay_key_is_one_file_name_that_reads_as_the_address_and_keeps_alike_addresses_apart():
    key = relay_key("relay.example.org:50051")
    assert key.startswith("relay-relay.example.org_50051-") and len(key.rsplit("-", 1)[1]) == 12
    odd = relay_key("[::1]:50051/../../etc")
    assert "/" not in odd and ".." not in odd.split("-")[1:2] and odd.startswith("relay-")
    assert relay_key("a:b") != relay_key("a_b")  # the same safe text, other relays: the hash tells them apart
    assert len(relay_key("x" * 500 + ":1")) < 100


def test_jobs_from_submit_job_have_a_directory_of_their_own(tmp_path):
    assert station_state_dir("lab_1", None, str(tmp_path)) == os.path.join(str(tmp_path), "lab_1", SUBMIT_JOB_DIR)


def test_the_base_is_xdg_state_home_or_the_home_directory_default(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_base() == str(tmp_path / "xdg" / "strands_robots")
    assert station_state_dir("lab_1").startswith(str(tmp_path / "xdg" / "strands_robots" / "lab_1"))
    monkeypatch.setenv("XDG_STATE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_base() == str(tmp_path / "home" / ".local" / "state" / "strands_robots")


@pytest.mark.parametrize("station_id", ["", ".", "..", "a/b", "a\\b"])
def test_a_station_id_that_cannot_name_a_directory_is_refused(station_id):
    with pytest.raises(ValueError, match="cannot name a state directory"):
        station_state_dir(station_id, "relay:1")


def test_a_relay_without_an_address_is_refused():
    with pytest.raises(ValueError, match="needs an address"):
        relay_key(" , ")
