from glob import glob

from setuptools import find_packages, setup

package_name = "strands_robots"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={"strands_robots": ["arm/assets/*.xml"]},
    include_package_data=True,
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools", "numpy", "PyYAML", "mujoco", "mcap", "mcap-ros2-support"],
    zip_safe=False,
    maintainer="strands_robots developers",
    maintainer_email="dev@strands-robots.invalid",
    description="Robot-policy rollouts on arms, reported step by step.",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "strands-robots = strands_robots.cli:main",
            "rollout_node = strands_robots.nodes.rollout_node:main",
            "arm_driver_node = strands_robots.nodes.arm_driver_node:main",
        ],
    },
)
