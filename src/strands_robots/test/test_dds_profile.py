"""The project's Fast DDS profile (strands_robots/dds/fastdds.xml) between real processes.

- A node process takes it by itself: started with no profile in its environment, it listens on no Fast DDS
  shared-memory port (without the profile it listens on one as soon as its participant exists).
- A reliable reader acknowledges a sample when the writer's heartbeat asks; the rollout node's exit waits for
  those acknowledgements (``rollout_node.wait_delivered``: up to ``exit_delivery_wait_s``, 1 s, after its last
  send). With Fast DDS's default period the acknowledgement came 2 s after the sample here, so every such exit
  waited its whole bound; the profile asks every 0.1 s. The reader is a process of its own: within one process
  Fast DDS delivers and acknowledges in process, without a heartbeat.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")

from ros_harness import wait_for  # noqa: E402

READER = """
import sys, time
import rclpy
from std_msgs.msg import String
from strands_robots.ros.qos import EVENT_QOS
rclpy.init()
node = rclpy.create_node("heartbeat_reader")
node.create_subscription(String, "heartbeat_probe", lambda _msg: None, EVENT_QOS)
print("ready", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_a_readers_acknowledgement_comes_well_within_the_rollout_nodes_exit_bound(ros_context):
    from rclpy.duration import Duration
    from std_msgs.msg import String

    from strands_robots.ros.qos import EVENT_QOS
    from strands_robots.nodes.rollout.params import EXIT_DELIVERY_WAIT_S as DELIVERED_WAIT_S

    reader = subprocess.Popen([sys.executable, "-c", READER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    writer = rclpy.create_node("heartbeat_writer", context=ros_context)
    try:
        assert reader.stdout.readline().strip() == "ready"
        pub = writer.create_publisher(String, "heartbeat_probe", EVENT_QOS)
        assert wait_for(lambda: pub.get_subscription_count() == 1, 10.0), "the reader was never matched"
        # Each sample acknowledged within the rollout node's bound: what its exit needs. Under Fast DDS's defaults
        # the first took the whole bound and more (the acknowledgement came 2 s after the sample); with the tests'
        # profile 0.01-0.1 s, 0.5 s once on a loaded machine. No finer figure is asserted: speed is for bench/.
        for n in range(3):
            pub.publish(String(data=str(n)))
            acked = pub.wait_for_all_acked(Duration(nanoseconds=int(DELIVERED_WAIT_S * 1e9)))
            assert acked, f"sample {n} not acknowledged within {DELIVERED_WAIT_S} s"
    finally:
        writer.destroy_node()
        reader.kill()
        reader.wait(10.0)


def _fast_dds_mappings(pid: int) -> list:
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        return sorted({line.split(None, 5)[-1].strip() for line in maps
                       if "/dev/shm/fastdds_" in line or "/dev/shm/fastrtps_" in line})


@pytest.mark.parametrize("own_profile", [False, True])
def test_a_node_process_takes_the_project_profile_by_itself_and_keeps_a_users_own(ros_context, tmp_path,
                                                                                  own_profile):
    from strands_robots.dds.fastdds_profile import PROFILE_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in PROFILE_VARIABLES}
    if own_profile:  # a user's profile that sets nothing: Fast DDS's defaults, shared memory included
        mine = tmp_path / "mine.xml"
        mine.write_text('<dds xmlns="http://www.eprosima.com"><profiles/></dds>', encoding="utf-8")
        env["FASTDDS_DEFAULT_PROFILES_FILE" if "FASTDDS" in _variable() else "FASTRTPS_DEFAULT_PROFILES_FILE"] = \
            str(mine)
    namespace = f"/profile_{os.getpid()}_{int(own_profile)}"
    node = subprocess.Popen([sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--ros-args", "-r",
                             f"__ns:={namespace}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    observer = rclpy.create_node("profile_observer", context=ros_context)
    try:
        # Seen in the graph: its participant exists and has announced its locators, so every port it listens on
        # is open by now.
        assert wait_for(lambda: ("arm_driver", namespace) in observer.get_node_names_and_namespaces(), 60.0), \
            "the node never appeared in the graph"
        ports = [m for m in _fast_dds_mappings(node.pid) if "_port" in m]
        assert (ports != []) == own_profile, ports
    finally:
        observer.destroy_node()
        node.kill()
        node.wait(10.0)


def _variable() -> str:
    from strands_robots.dds.fastdds_profile import profile_variable

    return profile_variable()
