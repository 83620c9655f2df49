from glob import glob

from setuptools import find_packages, setup

package_name = "strands_robots"

setup(
    name=package_name,
    version="0.1.0",
    # arm/assets holds only the MuJoCo model (no __init__.py): listed as a package so its data is installed
    # with it, not as a package setuptools finds importable and then warns about.
    packages=find_packages(exclude=["test"]) + ["strands_robots.arm.assets"],
    package_data={
        "strands_robots.arm.assets": ["*.xml"],
        "strands_robots.dds": ["*.xml"],
        "strands_robots.wire.proto": ["*.proto", "*.pyi"],
        "strands_robots.client": ["py.typed"],  # PEP 561: type checkers read the client's annotations
        "strands_robots.relay.web": ["templates/*.html", "static/*"],
    },
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
        ("share/" + package_name + "/config/ros2_control", glob("config/ros2_control/*")),
        ("share/" + package_name + "/config/suites", glob("config/suites/*.yaml")),
    ],
    install_requires=["setuptools", "numpy", "PyYAML", "mujoco", "mcap", "mcap-ros2-support", "Pillow"],
    zip_safe=False,
    maintainer="strands_robots developers",
    maintainer_email="dev@strands-robots.invalid",
    description="Robot-policy rollouts on arms, reported step by step.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            "strands-robots = strands_robots.cli:main",
            "rollout_node = strands_robots.nodes.rollout.node:main",
            "arm_driver_node = strands_robots.nodes.arm_driver.node:main",
            "station_node = strands_robots.nodes.station.node:main",
            "camera_node = strands_robots.nodes.camera.node:main",
            # Not ROS nodes: the relay and the Evaluation Client that rollout.launch.py runs as processes.
            "relay = strands_robots.relay.server:main",
            "demo_job = strands_robots.cli.demo_job:main",
        ],
        # Hardware adapters the arm driver's `hardware` parameter can name (a real arm registers its own).
        "strands_robots.hardware": [
            "mujoco = strands_robots.arm.mujoco_sim:hardware",
            "ros2_control = strands_robots.nodes.arm_driver.ros2_control:hardware",
        ],
        # Camera adapters the camera node's `adapter` parameter can name (a real camera registers its own).
        "strands_robots.cameras": [
            "mujoco = strands_robots.cameras.mujoco_cameras:cameras",
            "pattern = strands_robots.cameras.pattern:cameras",
        ],
    },
)
