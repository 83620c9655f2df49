#!/usr/bin/env bash
# One idempotent set-up: .venv with pinned dependencies, ROS 2 (a sourced distro, or the Kilted wheels from
# PyPI when none is sourced), then `colcon build` of the workspace. Safe to run again: it only redoes what
# changed. Usage: scripts/setup.sh [--force]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
stamp="$venv/.strands_setup_stamp"
force="${1:-}"

log() { printf '[setup] %s\n' "$*"; }

# What the environment must be re-made for: the requirement files and this script.
want="$(cat requirements/*.txt scripts/setup.sh | sha256sum | cut -c1-16)-${ROS_DISTRO:-wheels}"

if [ "$force" = "--force" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  t0=$(date +%s)
  if [ -n "${ROS_DISTRO:-}" ]; then
    log "ROS_DISTRO=$ROS_DISTRO is sourced: using it (system site packages visible), no ROS wheels"
    [ -d "$venv" ] || python3 -m venv --system-site-packages "$venv"
  else
    log "no ROS distro sourced: ROS 2 Kilted wheels from PyPI into .venv"
    [ -d "$venv" ] || python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install -q --upgrade 'pip>=24' 2>&1 | { grep -v "is ignored: it is neither" || true; }
  reqs=(-r requirements/python.txt)
  [ -n "${ROS_DISTRO:-}" ] || reqs+=(-r requirements/ros-wheels.txt)
  log "pip install (pinned by requirements/constraints.txt)"
  "$venv/bin/python" -m pip install -q -c requirements/constraints.txt "${reqs[@]}" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  if [ -z "${ROS_DISTRO:-}" ]; then
    # The wheels' generated-Python cmake exports name the wheel builder's include dirs; point them at ours.
    py_inc="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    np_inc="$("$venv/bin/python" -c 'import numpy; print(numpy.get_include())')"
    n=0
    while IFS= read -r -d '' f; do
      if grep -q '/opt/python/cp' "$f"; then
        sed -i -E "s#\"/opt/python/[^;\"]*/include/python3\.[0-9]+;/opt/python/[^;\"]*/numpy/_core/include\"#\"${py_inc};${np_inc}\"#" "$f"
        n=$((n+1))
      fi
    done < <(find "$venv/share" -name '*__rosidl_generator_pyExport.cmake' -print0)
    if grep -rl '/opt/python/cp' "$venv/share" --include='*__rosidl_generator_pyExport.cmake' >/dev/null 2>&1; then
      log "ERROR: some cmake exports still name /opt/python; fix the rewrite above"; exit 1
    fi
    log "rewrote include dirs in $n cmake export files"
  fi
  echo "$want" > "$stamp"
  log "environment ready in $(( $(date +%s) - t0 )) s"
else
  log ".venv up to date"
fi

# shellcheck source=/dev/null
set +u  # colcon's setup.bash reads unset variables
source "$root/scripts/env.sh" --no-install
set -u
log "colcon build"
t0=$(date +%s)
colcon --log-base "$root/log" build --base-paths "$root/src" --build-base "$root/build" \
  --install-base "$root/install" --symlink-install \
  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$venv/bin/python" \
  --event-handlers console_direct- console_cohesion- status- summary+ 2>&1 | tail -n 20
log "colcon build done in $(( $(date +%s) - t0 )) s"
