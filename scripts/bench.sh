#!/usr/bin/env bash
# The control-loop benchmark (bench/control_loop.py; bench/README.md says how to read it): set-up (if
# needed), then every mode and rate, figures printed and saved under bench/results/. Arguments go to the
# benchmark, e.g. `bash scripts/bench.sh --rates 200 --duration 5`.
# Its own ROS_DOMAIN_ID with discovery kept on this host, so a parallel test run never hears it.
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
echo "[bench] ROS_DOMAIN_ID=$ROS_DOMAIN_ID python=$(command -v python)"
python bench/control_loop.py "$@"
