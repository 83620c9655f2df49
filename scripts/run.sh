#!/usr/bin/env bash
# The main job: the richest end-to-end run the project can do today, with visible progress.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
domain_base=101
# shellcheck source=scripts/ros_shell.sh
source "$root/scripts/ros_shell.sh"
if python -c "import launch, launch_ros" >/dev/null 2>&1 && command -v ros2 >/dev/null 2>&1; then
  exec ros2 launch strands_robots rollout.launch.py "$@"
fi
echo "[run] 'launch'/'ros2' not available here: bringing up the same nodes with 'strands-robots up'"
exec python -m strands_robots.cli up --episodes 2 "$@"
