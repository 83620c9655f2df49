# Source me: a shell where `python -c "import rclpy, strands_robots_msgs.msg"` works and the package's
# commands (strands-robots, arm_driver_node, rollout_node) are on PATH.
#   source scripts/env.sh              # Kilted wheels (.venv), or the sourced distro when ROS_DISTRO is set
#   ROS=jazzy source scripts/env.sh    # Jazzy wheels (.venv-jazzy)
_sr_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/layout.sh
source "$_sr_root/scripts/layout.sh" || return 2
if [ ! -x "$SR_VENV/bin/python" ] && [ "${1:-}" != "--no-install" ]; then
  bash "$_sr_root/scripts/setup.sh"
fi
# shellcheck source=/dev/null
source "$SR_VENV/bin/activate"
if [ -z "${ROS_DISTRO:-}" ]; then
  # The wheels keep ament resources and cmake configs under the venv prefix; ament and colcon must see it.
  case ":${AMENT_PREFIX_PATH:-}:" in *":$VIRTUAL_ENV:"*) ;; *) export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}";; esac
  case ":${CMAKE_PREFIX_PATH:-}:" in *":$VIRTUAL_ENV:"*) ;; *) export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}";; esac
  export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
fi
if [ -f "$SR_INSTALL/setup.bash" ]; then
  # shellcheck source=/dev/null
  source "$SR_INSTALL/setup.bash"
  # ament_python installs console scripts under lib/<package> (setup.cfg's script_dir, for `ros2 run`);
  # put them on PATH too, so they run without ros2.
  case ":$PATH:" in *":$SR_INSTALL/strands_robots/lib/strands_robots:"*) ;;
    *) export PATH="$SR_INSTALL/strands_robots/lib/strands_robots:$PATH";; esac
fi
export PYTHONUNBUFFERED=1
unset _sr_root
