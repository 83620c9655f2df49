"""Stream one chunk to an arm driver as the rollout does, for tests that kill it mid-chunk (its own process).

The rollout's end of the command stream (:class:`strands_robots.driver_link.command_stream.CommandStream`): one
``ActionCommand`` per control period moving ``key`` through the given positions, each carrying the rest of the chunk
as its lookahead (:func:`strands_robots.arm.lookahead.flatten`), signed with the lease token from the environment
(``STRANDS_ROBOTS_TEST_LEASE_TOKEN``: a credential never goes on the command line). Prints one JSON line per command
sent (``{"sent": i}``), then, once every verdict is in (bounded),
``{"verdicts": [[step, applied keys, why not], ...]}``.

    STRANDS_ROBOTS_TEST_LEASE_TOKEN=... python ros2_control_rollout.py /ns left.joint_2 0.02 0.1 0.13 0.16
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid


def main(argv: list) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.arm.lookahead import flatten
    from strands_robots.driver_link.command_stream import CommandStream
    from strands_robots.ros.process import spin_in_background

    ns, key, period_s, values = argv[1], argv[2], float(argv[3]), [float(v) for v in argv[4:]]
    token = os.environ["STRANDS_ROBOTS_TEST_LEASE_TOKEN"]
    rclpy.init()
    node = rclpy.create_node(f"strands_test_rollout_{os.getpid()}")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    thread = spin_in_background(executor, "test_rollout")
    stream = CommandStream(node, f"{ns}/action_commands", f"{ns}/action_verdicts")
    try:
        deadline = time.monotonic() + 30.0
        while not stream.driver_listening():
            if time.monotonic() > deadline:
                print(json.dumps({"error": "no driver on the command stream"}), flush=True)
                return 1
            time.sleep(0.05)
        run_id = uuid.uuid4().hex
        # one command of no keys (it moves nothing) and its verdict: the stream flows both ways before the chunk
        # (a new reliable stream's first message can take longer than a command's 0.1 s deadline)
        if stream.send({}, f"warmup-{run_id}", 0, token, wait_s=10.0, stale_after_s=10.0) is None:
            print(json.dumps({"error": "no verdict for the warm-up command"}), flush=True)
            return 1
        stream.begin_run(run_id)
        chunk = [{key: v} for v in values]
        due = time.monotonic()
        for i, action in enumerate(chunk):
            stream.publish(action, run_id, i, token, stale_after_s=0.1, lookahead=flatten((key,), chunk[i + 1:]),
                           lookahead_period_s=period_s)
            print(json.dumps({"sent": i}), flush=True)
            due += period_s
            time.sleep(max(0.0, due - time.monotonic()))
        verdicts: list = []
        deadline = time.monotonic() + 10.0
        while len(verdicts) < len(chunk) and time.monotonic() < deadline:
            verdicts += [[int(m.step_index), list(m.applied_keys), m.error or ",".join(m.unresolved_reasons)]
                         for m in stream.collect(0.2)]
        print(json.dumps({"verdicts": verdicts}), flush=True)
        return 0
    finally:
        stream.close()
        executor.shutdown()
        thread.join(5.0)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
