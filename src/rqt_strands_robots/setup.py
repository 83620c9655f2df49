from setuptools import setup

package_name = "rqt_strands_robots"

setup(
    name=package_name,
    version="0.1.0",
    packages=[package_name],
    # rqt finds the plugin through the ament index marker, the installed package.xml (its <rqt_gui> export)
    # and the plugin.xml that export points at (share/<package>); all three must be installed.
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml", "plugin.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="strands_robots developers",
    maintainer_email="dev@strands-robots.invalid",
    description="rqt plugin monitoring a strands_robots station.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={"console_scripts": ["rqt_strands_robots = rqt_strands_robots.main:main"]},
)
