#!/usr/bin/env bash
# The control-loop benchmark (bench/control_loop.py; bench/README.md says how to read it): set-up (if
# needed), then every mode and rate, figures printed and saved under bench/results/. Arguments go to the
# benchmark, e.g. `bash scripts/bench.sh --rates 200 --duration 5`.
# Its own ROS_DOMAIN_ID with discovery kept on this host, so a parallel test run never hears it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
domain_base=1
# shellcheck source=scripts/ros_shell.sh
source "$root/scripts/ros_shell.sh"
echo "[bench] ROS_DOMAIN_ID=$ROS_DOMAIN_ID python=$(command -v python)"
python bench/control_loop.py "$@"
