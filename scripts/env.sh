# Source me: a shell where `python -c "import rclpy, strands_robots_msgs.msg"` works.
#   source scripts/env.sh
# Uses a sourced ROS distro when ROS_DISTRO is set, else the Kilted wheels in .venv.
_sr_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$_sr_root/.venv/bin/python" ] && [ "${1:-}" != "--no-install" ]; then
  bash "$_sr_root/scripts/setup.sh"
fi
# shellcheck source=/dev/null
source "$_sr_root/.venv/bin/activate"
if [ -z "${ROS_DISTRO:-}" ]; then
  # The wheels keep ament resources and cmake configs under the venv prefix; ament and colcon must see it.
  case ":${AMENT_PREFIX_PATH:-}:" in *":$VIRTUAL_ENV:"*) ;; *) export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}";; esac
  case ":${CMAKE_PREFIX_PATH:-}:" in *":$VIRTUAL_ENV:"*) ;; *) export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}";; esac
  export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
fi
if [ -f "$_sr_root/install/setup.bash" ]; then
  # shellcheck source=/dev/null
  source "$_sr_root/install/setup.bash"
fi
export PYTHONUNBUFFERED=1
unset _sr_root
