# Sourced by run.sh, test.sh and bench.sh (after `set -euo pipefail` and `root=...`): the set-up (quick when
# nothing changed), the ROS environment of the chosen distro (ROS=kilted|jazzy, scripts/layout.sh), a private
# ROS_DOMAIN_ID with discovery kept on this host (so parallel runs never hear each other), and this checkout's
# package source first on PYTHONPATH.
# Usage: domain_base=1; source "$root/scripts/ros_shell.sh"
bash "$root/scripts/setup.sh"
set +u  # colcon's setup.bash reads unset variables
# shellcheck source=/dev/null
source "$root/scripts/env.sh" --no-install
set -u
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( ($$ % 100) + ${domain_base:-1} ))}"
if [ "${ROS_DISTRO:-}" = "humble" ]; then
  export ROS_LOCALHOST_ONLY=1                      # Humble predates the discovery range
else
  export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST   # Iron and newer (Jazzy warns that ROS_LOCALHOST_ONLY is deprecated)
fi
export PYTHONPATH="$root/src/strands_robots${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
