# Sourced by setup.sh, env.sh and ros_shell.sh: where this checkout keeps the environment of one ROS 2 distro.
#
#   ROS=kilted (default)  the Kilted wheels from PyPI on Python 3.11: .venv, build/, install/, log/
#   ROS=jazzy             the Jazzy wheels from PyPI on Python 3.12:  .venv-jazzy, build-jazzy/, install-jazzy/, log-jazzy/
#   ROS_DISTRO set        a sourced distro wins (its own Python, system site packages): .venv, build/, ...
#
# Each distro has its own venv, lock file and build/install folders, so both can exist side by side.
# Sets: SR_ROS SR_VENV SR_BUILD SR_INSTALL SR_LOG SR_PYTHON (SR_PYTHON_FOR: its distro) SR_ROS_REQS SR_CONSTRAINTS
_sr_top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${ROS_DISTRO:-}" ]; then
  SR_ROS="sourced-${ROS_DISTRO}"
  _sr_suffix=""
  SR_PYTHON="python3"
  SR_ROS_REQS=""
  SR_CONSTRAINTS="$_sr_top/requirements/constraints.txt"
else
  SR_ROS="${ROS:-kilted}"
  # An SR_PYTHON exported by a shell set up for the other distro (`source scripts/env.sh`, then
  # `make test ROS=jazzy`) is not this distro's interpreter: choose again.
  if [ -n "${SR_PYTHON_FOR:-}" ] && [ "$SR_PYTHON_FOR" != "$SR_ROS" ]; then unset SR_PYTHON; fi
  case "$SR_ROS" in
    kilted)
      _sr_suffix=""
      SR_PYTHON="${SR_PYTHON:-python3}"
      SR_ROS_REQS="$_sr_top/requirements/ros-wheels.txt"
      SR_CONSTRAINTS="$_sr_top/requirements/constraints.txt"
      ;;
    jazzy)
      _sr_suffix="-jazzy"
      # Jazzy's wheels target Ubuntu 24.04's Python 3.12.
      # (pyenv's shim is on PATH even where 3.12 is not the selected version: try each candidate for real.)
      if [ -z "${SR_PYTHON:-}" ]; then
        for _sr_cand in "$(command -v python3.12 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 \
                        /usr/bin/python3.12 /usr/local/bin/python3.12; do
          if [ -n "$_sr_cand" ] && [ -x "$_sr_cand" ] && "$_sr_cand" -c 'import venv' >/dev/null 2>&1; then
            SR_PYTHON="$_sr_cand"; break
          fi
        done
        unset _sr_cand
      fi
      SR_ROS_REQS="$_sr_top/requirements/ros-wheels-jazzy.txt"
      SR_CONSTRAINTS="$_sr_top/requirements/constraints-jazzy.txt"
      ;;
    *)
      echo "[setup] unknown ROS=$SR_ROS (kilted or jazzy)" >&2
      return 2 2>/dev/null || exit 2
      ;;
  esac
fi
SR_VENV="$_sr_top/.venv$_sr_suffix"
SR_BUILD="$_sr_top/build$_sr_suffix"
SR_INSTALL="$_sr_top/install$_sr_suffix"
SR_LOG="$_sr_top/log$_sr_suffix"
SR_PYTHON_FOR="$SR_ROS"
export SR_ROS SR_VENV SR_BUILD SR_INSTALL SR_LOG SR_PYTHON SR_PYTHON_FOR SR_ROS_REQS SR_CONSTRAINTS
unset _sr_top _sr_suffix
