"""The project's Fast DDS profile: taken by every process unless the user named their own (dds/fastdds_profile.py).

What the profile does between real processes (no shared-memory port, a restarted process heard again) is pinned
by test/test_restart_reconnect.py; its heartbeat by test_dds_profile.py. Here: which file, under which variable,
when the user's settings win, and that both files say the same in their Fast DDS's element names.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from strands_robots.dds import fastdds_profile
from strands_robots.dds.fastdds_profile import (
    PROFILE_VARIABLES,
    profile_path,
    project_profile_setting,
    use_project_profile,
)

NS = {"dds": "http://www.eprosima.com"}


@pytest.mark.parametrize("distro, variable, name", [("humble", "FASTRTPS_DEFAULT_PROFILES_FILE", "fastdds2.xml"),
                                                    ("jazzy", "FASTRTPS_DEFAULT_PROFILES_FILE", "fastdds2.xml"),
                                                    ("kilted", "FASTDDS_DEFAULT_PROFILES_FILE", "fastdds.xml"),
                                                    ("rolling", "FASTDDS_DEFAULT_PROFILES_FILE", "fastdds.xml")])
def test_a_process_takes_the_project_profile_where_its_fast_dds_reads_it(tmp_path, distro, variable, name):
    env = {"ROS_DISTRO": distro}
    assert use_project_profile(env, cwd=str(tmp_path)) == {variable: profile_path(env)}
    assert env[variable].endswith(f"/strands_robots/dds/{name}")
    assert ET.parse(env[variable]).getroot().tag == "{http://www.eprosima.com}dds"


@pytest.mark.parametrize("variable", PROFILE_VARIABLES)
def test_a_profile_the_user_named_is_kept_under_either_name(tmp_path, variable):
    env = {"ROS_DISTRO": "kilted", variable: "/home/me/my_fastdds.xml"}
    assert use_project_profile(env, cwd=str(tmp_path)) == {}
    assert env == {"ROS_DISTRO": "kilted", variable: "/home/me/my_fastdds.xml"}


@pytest.mark.parametrize("distro, name", [("kilted", "DEFAULT_FASTDDS_PROFILES.xml"),
                                          ("jazzy", "DEFAULT_FASTRTPS_PROFILES.xml")])
def test_a_default_profile_in_the_working_directory_is_kept(tmp_path, distro, name):
    (tmp_path / name).write_text("<dds/>", encoding="utf-8")
    assert project_profile_setting({"ROS_DISTRO": distro}, str(tmp_path)) == {}


def test_another_middleware_is_left_alone_and_fast_dds_named_explicitly_takes_the_profile(tmp_path):
    assert project_profile_setting({"ROS_DISTRO": "kilted", "RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
                                   str(tmp_path)) == {}
    for rmw in ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"):
        setting = project_profile_setting({"ROS_DISTRO": "kilted", "RMW_IMPLEMENTATION": rmw}, str(tmp_path))
        assert list(setting) == ["FASTDDS_DEFAULT_PROFILES_FILE"]


def _text(element, path):
    found = element.find(path, NS)
    assert found is not None, path
    return found


def _duration(element) -> float:
    return float(_text(element, "dds:sec").text) + float(element.findtext("dds:nanosec", "0", NS)) / 1e9


@pytest.mark.parametrize("name, heartbeat", [("fastdds.xml", "heartbeat_period"), ("fastdds2.xml", "heartbeatPeriod")])
def test_the_profile_keeps_every_byte_off_shared_memory_and_announces_every_half_second(name, heartbeat):
    root = ET.parse(fastdds_profile._HERE + "/" + name).getroot()
    participant = _text(root, "dds:profiles/dds:participant")
    assert participant.get("is_default_profile") == "true"
    rtps = _text(participant, "dds:rtps")
    # User data and discovery listen on UDP locators only: no shared-memory locator is announced, so no peer
    # writes into this process's shared memory and none of its readers listen there.
    for path in ("dds:defaultUnicastLocatorList", "dds:builtin/dds:metatrafficUnicastLocatorList",
                 "dds:builtin/dds:metatrafficMulticastLocatorList"):
        kinds = [child.tag.split("}")[1] for locator in _text(rtps, path) for child in locator]
        assert kinds and set(kinds) == {"udpv4"}, (path, kinds)
    multicast = _text(rtps, "dds:builtin/dds:metatrafficMulticastLocatorList/dds:locator/dds:udpv4/dds:address")
    assert multicast.text == "239.255.0.1"  # discovery across hosts as Fast DDS's default does
    discovery = _text(rtps, "dds:builtin/dds:discovery_config")
    assert _duration(_text(discovery, "dds:leaseAnnouncement")) == 0.5
    assert _duration(_text(discovery, "dds:leaseDuration")) == 20.0
    writer = _text(root, "dds:profiles/dds:data_writer")
    reader = _text(root, "dds:profiles/dds:data_reader")
    assert writer.get("is_default_profile") == reader.get("is_default_profile") == "true"
    for endpoint in (writer, reader):  # data sharing is shared memory too
        assert _text(endpoint, "dds:qos/dds:data_sharing/dds:kind").text == "OFF"
    assert _duration(_text(writer, f"dds:times/dds:{heartbeat}")) == 0.1
