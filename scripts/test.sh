#!/usr/bin/env bash
# All tests: set-up (if needed), colcon build, then unit, node (real DDS) and system tests with pytest.
# Each run gets its own ROS_DOMAIN_ID with discovery kept on this host, so parallel runs never hear each other.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
domain_base=1
# shellcheck source=scripts/ros_shell.sh
source "$root/scripts/ros_shell.sh"
echo "[test] ROS_DOMAIN_ID=$ROS_DOMAIN_ID python=$(command -v python)"
dirs=(src/strands_robots/test)
[ -d test ] && dirs+=(test)
# A test that fails is run again (at most twice) before it counts as failed: a few of the DDS and process tests
# can flake when a 2-core machine stalls a node process for a few hundred ms. Every rerun is reported (an "R" in
# the progress line, "N rerun" in the summary and, with -rR, each rerun test named), so a flake stays visible.
# TEST_WORKERS=N (N > 0): N pytest-xdist workers share the tests (--dist loadgroup, src/strands_robots/test/
# xdist_groups.py): every test file is a group of its own that the next free worker takes (files sharing a session
# fixture together), the longest first (--no-loadscope-reorder: pytest-xdist would otherwise hand out the groups
# with the most tests first, leaving a long one-test file to the end); each worker on its own ROS_DOMAIN_ID
# (ros_harness.worker_domain, up to 4).
# The default is 3: the suite mostly waits (real-time episodes, process start-up, discovery), so on a 2-core
# machine a third worker fills those waits and a fourth slows every test (docs/testing.md); TEST_WORKERS=0 runs
# everything in this one process.
# A worker that dies (a segfault in a test process) is not replaced (--max-worker-restart 0): pytest-xdist's
# loadgroup scheduler never hands a crashed worker's group to its replacement, so with a replacement the run would
# wait for ever; without one it ends at once, failed, naming the test the worker was running.
workers="${TEST_WORKERS:-3}"
parallel=()
if [ "$workers" != "0" ]; then
  parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder --max-worker-restart 0)
fi
# --durations: the 30 slowest test phases close every run, so a log says where its minutes went.
python -m pytest -p no:cacheprovider -q -rR --durations=30 --reruns 2 --reruns-delay 1 "${parallel[@]}" "${dirs[@]}" "$@"
