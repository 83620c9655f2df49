#!/usr/bin/env bash
# One idempotent set-up: system packages the tests need, a venv with pinned dependencies, ROS 2 (a sourced
# distro, or the Kilted / Jazzy wheels from PyPI when none is sourced), then `colcon build` of the workspace.
# Safe to run again: it only redoes what changed. Usage: [ROS=kilted|jazzy] scripts/setup.sh [--force]
# (scripts/layout.sh says where each distro's venv, build and install folders are.)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/layout.sh
source "$root/scripts/layout.sh"
venv="$SR_VENV"
stamp="$venv/.strands_setup_stamp"
force="${1:-}"

log() { printf '[setup] %s\n' "$*"; }

bash "$root/scripts/system_deps.sh"

# What the environment must be re-made for: the requirement files, this script and the layout.
want="$(cat requirements/*.txt scripts/setup.sh scripts/layout.sh | sha256sum | cut -c1-16)-$SR_ROS"

if [ "$force" = "--force" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  t0=$(date +%s)
  if [ -n "${ROS_DISTRO:-}" ]; then
    log "ROS_DISTRO=$ROS_DISTRO is sourced: using it (system site packages visible), no ROS wheels"
    [ -d "$venv" ] || python3 -m venv --system-site-packages "$venv"
  else
    if [ -z "$SR_PYTHON" ] || ! "$SR_PYTHON" -c 'import venv' >/dev/null 2>&1; then
      log "ERROR: ROS=$SR_ROS needs a Python for its wheels (3.12 for jazzy) and none was found"; exit 1
    fi
    log "no ROS distro sourced: ROS 2 $SR_ROS wheels from PyPI into $(basename "$venv") ($("$SR_PYTHON" --version))"
    [ -d "$venv" ] || "$SR_PYTHON" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install -q --upgrade 'pip>=24' 2>&1 | { grep -v "is ignored: it is neither" || true; }
  reqs=(-r requirements/python.txt)
  [ -n "$SR_ROS_REQS" ] && reqs+=(-r "$SR_ROS_REQS")
  log "pip install (pinned by requirements/$(basename "$SR_CONSTRAINTS"))"
  "$venv/bin/python" -m pip install -q -c "$SR_CONSTRAINTS" "${reqs[@]}" 2>&1 | { grep -v "is ignored: it is neither" || true; }
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
  rm -f "$SR_BUILD/.strands_build_stamp"
  echo "$want" > "$stamp"
  log "environment ready in $(( $(date +%s) - t0 )) s"
else
  log "$(basename "$venv") up to date"
fi

# colcon build only when something it installs changed: package manifests, interfaces, setup files, launch and
# config files, the file list. Python sources are used in place (--symlink-install), so editing one needs no
# build.
build_stamp="$SR_BUILD/.strands_build_stamp"
build_want="$( { find src -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort;
                 find src -type f ! -path '*/__pycache__/*' ! -name '*.py' ! -name '*.pyc' -print0 \
                   | LC_ALL=C sort -z | xargs -0 cat;
                 cat src/*/setup.py 2>/dev/null; echo "$want"; } | sha256sum | cut -c1-16)"
if [ "$force" != "--force" ] && [ -f "$build_stamp" ] && [ "$(cat "$build_stamp")" = "$build_want" ] \
    && [ -f "$SR_INSTALL/setup.bash" ]; then
  log "workspace build up to date ($(basename "$SR_INSTALL"))"
  exit 0
fi
# shellcheck source=/dev/null
set +u  # colcon's setup.bash reads unset variables
source "$root/scripts/env.sh" --no-install
set -u
log "colcon build -> $(basename "$SR_INSTALL") (a few minutes the first time; a line as each package starts and ends)"
t0=$(date +%s)
if ! colcon --log-base "$SR_LOG" build --base-paths "$root/src" --build-base "$SR_BUILD" \
    --install-base "$SR_INSTALL" --symlink-install \
    --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$venv/bin/python" \
    --event-handlers console_direct- console_cohesion- console_start_end+ status- summary+ \
    || [ ! -f "$SR_INSTALL/setup.bash" ]; then
  log "ERROR: colcon build failed (see $SR_LOG)"; exit 1
fi
mkdir -p "$SR_BUILD"
echo "$build_want" > "$build_stamp"
log "colcon build done in $(( $(date +%s) - t0 )) s"
