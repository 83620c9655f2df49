#!/usr/bin/env bash
# All tests: set-up (if needed), colcon build, then unit, node (real DDS) and system tests with pytest.
# Each run gets its own ROS_DOMAIN_ID with discovery kept on this host, so parallel runs never hear each other.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
set +u
# shellcheck source=/dev/null
source "$root/scripts/env.sh" --no-install
set -u
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( ($$ % 100) + 1 ))}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST   # Iron and newer
export ROS_LOCALHOST_ONLY=1                      # Humble
export PYTHONPATH="$root/src/strands_robots${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
echo "[test] ROS_DOMAIN_ID=$ROS_DOMAIN_ID python=$(command -v python)"
dirs=(src/strands_robots/test)
[ -d test ] && dirs+=(test)
python -m pytest -p no:cacheprovider -q "${dirs[@]}" "$@"
