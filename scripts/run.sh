#!/usr/bin/env bash
# The main job: the richest end-to-end run the project can do today, with visible progress.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
set +u
# shellcheck source=/dev/null
source "$root/scripts/env.sh" --no-install
set -u
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( ($$ % 100) + 101 ))}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_LOCALHOST_ONLY=1
export PYTHONPATH="$root/src/strands_robots${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
if python -c "import launch, launch_ros" >/dev/null 2>&1 && command -v ros2 >/dev/null 2>&1; then
  exec ros2 launch strands_robots rollout.launch.py "$@"
fi
echo "[run] 'launch'/'ros2' not available here: bringing up the same nodes with 'strands-robots up'"
exec python -m strands_robots.cli up --episodes 2 "$@"
