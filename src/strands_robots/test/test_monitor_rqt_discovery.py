"""rqt finds the monitor plugin on a fresh install (no --force-discover).

The package installs its ament index marker, package.xml (with the <rqt_gui> export) and plugin.xml, and the
export points at the installed plugin.xml.

The discovery below is the one rqt_gui's ROS plugin provider performs: every package in the ament index whose
installed package.xml exports ``rqt_gui`` with a ``plugin`` attribute, ``${prefix}`` being the package's share
directory; the plugin.xml's class ``type`` names the module and class rqt imports.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from monitor_helpers import REPO

catkin_pkg = pytest.importorskip("catkin_pkg.package", reason="catkin_pkg (rqt's package.xml parser) is missing")
ament_index = pytest.importorskip("ament_index_python.packages", reason="ament_index_python is missing")

PACKAGE = "rqt_strands_robots"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Install the package into an empty prefix the way colcon's ament_python build does (setup.py)."""
    work = tmp_path_factory.mktemp("rqt")
    source = work / "src"
    shutil.copytree(REPO / "src" / PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    prefix = work / "install"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-compile",
                    "--prefix", str(prefix), str(source)], check=True, capture_output=True, text=True)
    return prefix


def discover(prefix: Path) -> list[tuple[str, Path]]:
    """(package, plugin.xml) for every rqt_gui export in the ament index under ``prefix`` only."""
    found = []
    old = os.environ.get("AMENT_PREFIX_PATH")
    os.environ["AMENT_PREFIX_PATH"] = str(prefix)
    try:
        packages = ament_index.get_packages_with_prefixes()
    finally:
        if old is None:
            os.environ.pop("AMENT_PREFIX_PATH")
        else:
            os.environ["AMENT_PREFIX_PATH"] = old
    for name, package_prefix in packages.items():
        share = Path(package_prefix) / "share" / name
        manifest = share / "package.xml"
        if not manifest.is_file():
            continue
        for export in catkin_pkg.parse_package(str(manifest)).exports:
            if export.tagname == "rqt_gui" and "plugin" in export.attributes:
                found.append((name, Path(export.attributes["plugin"].replace("${prefix}", str(share)))))
    return found


def test_rqt_discovers_the_installed_plugin_and_its_class(installed):
    found = discover(installed)
    assert [name for name, _ in found] == [PACKAGE], "the ament index marker or the <rqt_gui> export is missing"
    plugin_xml = found[0][1]
    assert plugin_xml.is_file(), f"the export points at {plugin_xml}, which is not installed"
    classes = ET.parse(plugin_xml).getroot().findall("class")
    assert len(classes) == 1
    cls = classes[0]
    assert cls.get("base_class_type") == "rqt_gui_py::Plugin"
    assert cls.find("qtgui/label").text == "Strands Robots Monitor"
    module, _, class_name = cls.get("type").rpartition(".")
    site = next(installed.glob("lib/python*/site-packages"))
    module_file = site.joinpath(*module.split(".")).with_suffix(".py")
    assert module_file.is_file(), f"{cls.get('type')} names a module that is not installed"
    tree = ast.parse(module_file.read_text())
    plugin = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    assert plugin and [b.id for b in plugin[0].bases if isinstance(b, ast.Name)] == ["Plugin"]
    for method in ("shutdown_plugin", "save_settings", "restore_settings"):
        assert any(isinstance(n, ast.FunctionDef) and n.name == method for n in plugin[0].body)
