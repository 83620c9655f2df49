#!/usr/bin/env bash
# The main job: the richest end-to-end run the project can do today, with visible progress: a simulated
# station (local relay, arm driver, rollout and station nodes) running the demo job, its policy served through
# the relay by the Evaluation Client as a remote team would (`strands-robots up`; ARGS pass through, e.g.
# `make run ARGS="--rollout --policy scripted"` or `ARGS="--relay-credentials FILE"`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
domain_base=101
# shellcheck source=scripts/ros_shell.sh
source "$root/scripts/ros_shell.sh"
exec python -m strands_robots.cli up "$@"
