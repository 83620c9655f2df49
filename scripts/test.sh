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
python -m pytest -p no:cacheprovider -q "${dirs[@]}" "$@"
