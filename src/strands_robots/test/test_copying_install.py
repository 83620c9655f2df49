"""A copying colcon install (no ``--symlink-install``) holds every file the launch files, nodes and CLI default to.

The workspace's own build links to the sources (``--symlink-install``), where a path computed from a module's
``__file__`` happens to reach ``src/strands_robots/config``; a distro's or a user's normal install has no source
tree. So this module builds ``strands_robots`` and ``rqt_strands_robots`` with colcon into a temporary directory
without symlinks (``strands_robots_msgs`` is taken from the environment's install) and, in a process that sees only
that install (no source tree on its path, its working directory elsewhere):

* resolves every default the CLI, the nodes and the station use (config files, the MJCF, the message
  definitions), with ROS sourced and without it, and checks each is a file of that install;
* reads every launch file of the install (no ``launch`` needed) and checks each file it names (configs, included
  launch files) and each executable it runs is installed;
* checks every data file of the Python package (templates, assets, .proto) was installed with it.

Where ``launch`` is importable, the installed ``rollout.launch.py`` is also run for real until its job is
submitted, then stopped with Ctrl-C.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

PACKAGE_SRC = Path(__file__).resolve().parent.parent  # src/strands_robots
WORKSPACE_SRC = PACKAGE_SRC.parent
PYTHON_DIR = f"python{sys.version_info.major}.{sys.version_info.minor}"
BUILD_TIMEOUT_S = 600.0

# Every default the CLI, the nodes and the station resolve, printed as JSON by a process that sees only the install.
RESOLVER = textwrap.dedent("""
    import importlib.util, json
    import strands_robots
    from strands_robots import package_files
    from strands_robots.arm.model import MODEL_PATH
    from strands_robots.cameras.config import cameras_refusal, default_config_path as cameras_file
    from strands_robots.cli import station_demo
    from strands_robots.cli.up import default_config_file
    from strands_robots.nodes.arm_driver.params import default_config_path as arms_file
    from strands_robots.rollout.msg_schema import find_msg_file
    from strands_robots.station.provenance import git_revision, load_station_facts

    facts = load_station_facts(None, None, ["scene", "wrist"])
    out = {
        "files": {
            "the package (imported)": strands_robots.__file__,
            "up --rollout: config_file": default_config_file(),
            "up (demo), LocalStation: rollout.yaml": station_demo.config_file("rollout.yaml"),
            "up (demo), LocalStation: station.yaml": station_demo.config_file("station.yaml"),
            "up, demo_job: the job file": station_demo.default_demo_job(),
            "camera node, station node, launch check: cameras_file": cameras_file(),
            "arm driver: config_file": arms_file(),
            "station provenance: arms.yaml": facts.files[0].path,
            "station provenance: cameras.yaml": facts.files[1].path,
            "arm driver: the MJCF": MODEL_PATH,
            "the rqt plugin's module": importlib.util.find_spec("rqt_strands_robots").origin,
        },
        "messages": {
            "recorder schema: ObserverEvent": str(find_msg_file("strands_robots_msgs/msg/ObserverEvent")),
            "recorder schema: JobStatus": str(find_msg_file("strands_robots_msgs/msg/JobStatus")),
        },
        "cameras_refusal": cameras_refusal("", "scene,wrist"),
        "git_revision": git_revision(),
        "share": str(package_files.candidate_dirs()[0]),
    }
    print(json.dumps(out))
""")


def _colcon() -> str:
    found = shutil.which("colcon") or str(Path(sys.executable).parent / "colcon")
    if not Path(found).exists():
        pytest.skip("colcon is not installed (source scripts/env.sh)")
    return found


def _prefix_of(module: str) -> "Path | None":
    """Return the install prefix a module's package is installed under (``<prefix>/lib/pythonX.Y/site-packages/<pkg>``).

    None when it is imported from elsewhere (a source tree, a build directory).
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{module} is not built (colcon build)")
    location = Path(list(spec.submodule_search_locations)[0])
    if location.parent.name not in ("site-packages", "dist-packages"):
        return None
    return location.parents[3]


def _msgs_prefix() -> Path:
    prefix = _prefix_of("strands_robots_msgs")
    assert prefix is not None, "strands_robots_msgs is not imported from an install"
    return prefix


def _site(prefix: Path) -> Path:
    return prefix / "lib" / PYTHON_DIR / "site-packages"


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    """``colcon build`` of strands_robots and rqt_strands_robots, copying, into a temporary directory."""
    base = tmp_path_factory.mktemp("copying_install")
    proc = subprocess.run(
        [_colcon(), "--log-base", str(base / "log"), "build", "--base-paths", str(WORKSPACE_SRC),
         "--packages-select", "strands_robots", "rqt_strands_robots", "--build-base", str(base / "build"),
         "--install-base", str(base / "install"), "--event-handlers", "console_direct-", "console_cohesion-",
         "status-", "summary-"],
        cwd=str(base), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert proc.returncode == 0, f"colcon build failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    install = base / "install"
    assert not any(p.is_symlink() for p in (install / "strands_robots").rglob("*")), "the install links to sources"
    return install


def _outside_the_workspace(value: str, drop: tuple) -> str:
    return os.pathsep.join(p for p in value.split(os.pathsep) if p and not any(
        Path(p).resolve() == d or d in Path(p).resolve().parents for d in drop))


def install_env(install: Path, sourced: bool) -> dict:
    """Return this environment with the copying install in place of the workspace's strands_robots and sources.

    ``sourced`` False: no AMENT_PREFIX_PATH at all (ROS not sourced; the Python paths only).
    """
    drop = {PACKAGE_SRC.resolve(), WORKSPACE_SRC.parent.resolve() / "build"}
    workspace_prefix = _prefix_of("strands_robots")  # the workspace's own install (the dev build), dropped
    if workspace_prefix is not None:
        drop |= {workspace_prefix.resolve(), workspace_prefix.parent.resolve() / "rqt_strands_robots"}
    drop = tuple(drop)
    msgs = _msgs_prefix()
    ours = [install / "strands_robots", install / "rqt_strands_robots"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*(str(_site(p)) for p in ours), str(_site(msgs)),
                                         _outside_the_workspace(env.get("PYTHONPATH", ""), drop)]).strip(os.pathsep)
    env["PYTHONNOUSERSITE"] = "1"
    env["PATH"] = os.pathsep.join([str(install / "strands_robots" / "lib" / "strands_robots"),
                                   _outside_the_workspace(env.get("PATH", ""), drop)])
    if sourced:
        env["AMENT_PREFIX_PATH"] = os.pathsep.join([*(str(p) for p in ours), str(msgs), _outside_the_workspace(
            env.get("AMENT_PREFIX_PATH", ""), drop)]).strip(os.pathsep)
    else:
        env.pop("AMENT_PREFIX_PATH", None)
    return env


@pytest.mark.parametrize("sourced", [True, False], ids=["ros_sourced", "ros_not_sourced"])
def test_every_default_file_of_the_cli_nodes_and_station_resolves_inside_a_copying_install(install, sourced,
                                                                                          tmp_path):
    proc = subprocess.run([sys.executable, "-c", RESOLVER], cwd=str(tmp_path), env=install_env(install, sourced),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    share = install / "strands_robots" / "share" / "strands_robots"
    assert found["share"] == str(share)
    ours = (install / "strands_robots").resolve()
    for what, path in found["files"].items():
        resolved = Path(path).resolve()
        assert resolved.is_file(), f"{what}: {path} is not a file"
        if what == "the rqt plugin's module":
            assert (install / "rqt_strands_robots").resolve() in resolved.parents, f"{what}: {path}"
        else:
            assert ours in resolved.parents, f"{what}: {path} is not in the install {ours}"
    msgs_share = _msgs_prefix() / "share" / "strands_robots_msgs" / "msg"  # as installed (it may link further)
    for what, path in found["messages"].items():
        assert Path(path).parent == msgs_share and Path(path).is_file(), f"{what}: {path}"
    assert found["cameras_refusal"] == ""
    assert found["git_revision"] == ""  # an installed copy is no checkout: no revision read from the sources


def _launch_references(path: Path) -> dict:
    """Return what a launch file names: config files (share/config), included launch files, executables."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    refs: dict = {"config": set(), "launch": set(), "executables": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if name == "PathJoinSubstitution" and node.args and isinstance(node.args[0], ast.List):
                parts = [e.value for e in node.args[0].elts if isinstance(e, ast.Constant)]
                if parts[:1] == ["config"]:
                    refs["config"].add("/".join(parts[1:]))
            elif name == "join" and strings and strings[-1].endswith(".launch.py"):
                refs["launch"].add(strings[-1])
            elif name == "ExecutableInPackage" and len(strings) == 2 and strings[1] == "strands_robots":
                refs["executables"].add(strings[0])
            for keyword in node.keywords:
                if keyword.arg == "executable" and isinstance(keyword.value, ast.Constant):
                    refs["executables"].add(keyword.value.value)
    return refs


def test_every_file_and_executable_the_installed_launch_files_name_is_installed(install):
    share = install / "strands_robots" / "share" / "strands_robots"
    launch_files = sorted((share / "launch").glob("*.launch.py"))
    assert [p.name for p in launch_files] == sorted(p.name for p in (PACKAGE_SRC / "launch").glob("*.launch.py"))
    executables = install / "strands_robots" / "lib" / "strands_robots"
    named = {"config": set(), "launch": set(), "executables": set()}
    for launch_file in launch_files:
        for kind, names in _launch_references(launch_file).items():
            named[kind] |= names
    # the files name at least what rollout.launch.py's defaults and includes are (a parser that finds nothing
    # would pass everything)
    assert {"rollout.yaml", "station.yaml", "relay.yaml", "demo_job.yaml"} <= named["config"], named
    assert {"station.launch.py", "relay.launch.py", "arm_driver.launch.py"} <= named["launch"], named
    assert {"demo_job", "relay", "station_node", "rollout_node", "arm_driver_node", "camera_node"} <= \
        named["executables"], named
    for name in named["config"]:
        assert (share / "config" / name).is_file(), f"config/{name} is not installed"
    for name in named["launch"]:
        assert (share / "launch" / name).is_file(), f"launch/{name} is not installed"
    for name in named["executables"]:
        path = executables / name
        assert path.is_file() and os.access(path, os.X_OK), f"{name} is not installed in {executables}"


def test_every_data_file_of_the_python_package_is_installed_with_it(install):
    source = PACKAGE_SRC / "strands_robots"
    installed = _site(install / "strands_robots") / "strands_robots"
    data = [p.relative_to(source) for p in source.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
            and "__pycache__" not in p.parts]
    assert data, "no data files found: the walk is wrong"
    missing = [str(p) for p in data if not (installed / p).is_file()]
    assert not missing, f"not installed with the package: {missing}"
    for name in ("package.xml", "plugin.xml"):
        assert (install / "rqt_strands_robots" / "share" / "rqt_strands_robots" / name).is_file(), name


def test_the_installed_rollout_launch_starts_its_job_and_stops_cleanly_on_ctrl_c(install, tmp_path):
    pytest.importorskip("launch.launch_service", reason="launch is not installed (the Kilted PyPI wheels lack it)")
    pytest.importorskip("launch_ros", reason="launch_ros is not installed")
    pytest.importorskip("mujoco", reason="MuJoCo is not installed")
    runner = textwrap.dedent("""
        import sys
        import launch
        from launch.actions import IncludeLaunchDescription
        from launch.launch_description_sources import PythonLaunchDescriptionSource
        from ament_index_python.packages import get_package_share_directory
        path = get_package_share_directory("strands_robots") + "/launch/rollout.launch.py"
        print("launch file " + path, flush=True)
        service = launch.LaunchService(argv=sys.argv[1:])
        service.include_launch_description(IncludeLaunchDescription(
            PythonLaunchDescriptionSource(path), launch_arguments=[tuple(a.split(":=", 1)) for a in sys.argv[1:]]))
        sys.exit(service.run())
    """)
    env = install_env(install, sourced=True)
    env["PYTHONUNBUFFERED"] = "1"
    namespace = f"copying_install_{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", runner, f"namespace:={namespace}"], cwd=str(tmp_path), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list = []
    submitted = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if re.search(r"\[demo_job\] submitted job ", line):
                submitted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert submitted.wait(180.0), "\n".join(lines)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
        rc = proc.wait(60.0)
        reader.join(10.0)
        out = "\n".join(lines)
        assert rc == 0, out
        assert f"launch file {install / 'strands_robots' / 'share' / 'strands_robots'}" in out, out
        assert "Traceback" not in out and "process has died" not in out, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10.0)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything the launch left in its group
        except (ProcessLookupError, PermissionError):
            pass
