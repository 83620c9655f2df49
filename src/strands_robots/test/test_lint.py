"""Lint as ROS 2 packages do: flake8's checks and pep257 over the package's Python, xmllint on package.xml.

ament_flake8 and ament_pep257 (what a package's generated ``test_flake8.py``/``test_pep257.py`` run) are
pycodestyle + pyflakes and pydocstyle with the pep257 convention; here ruff runs the same rule families with
the package's ``ruff.toml`` (line length 120, pep257 convention, missing docstrings allowed as ament allows them).
Findings are reported per area of the package (``strands_robots/arm``, ``strands_robots/nodes``, ``test``, ...)
so each failure names the files to fix. Every ``package.xml`` of the workspace is checked by ``xmllint`` (well
formed) and by catkin_pkg, the parser the ROS tools use, for the package format 3 rules.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent
WORKSPACE_SRC = PACKAGE.parent
RUFF_CONFIG = PACKAGE / "ruff.toml"


def _ruff() -> list:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else []


def _areas() -> list:
    """Subpackages of strands_robots, its top-level modules as one area, launch/, test/, setup.py."""
    code = PACKAGE / "strands_robots"
    areas = sorted(p.relative_to(PACKAGE).as_posix() for p in code.iterdir()
                   if p.is_dir() and (p / "__init__.py").exists())
    return ["strands_robots/*.py", *areas, "launch", "test", "setup.py"]


def _area_of(path: Path) -> str:
    rel = path.resolve().relative_to(PACKAGE).as_posix()
    parts = rel.split("/")
    if parts[0] == "strands_robots":
        return "strands_robots/*.py" if len(parts) == 2 else f"strands_robots/{parts[1]}"
    return parts[0]


@pytest.fixture(scope="module")
def ruff_findings() -> dict:
    ruff = _ruff()
    if not ruff:
        pytest.skip("ruff is not installed (pip install ruff; it is listed in requirements/python.txt)")
    proc = subprocess.run([*ruff, "check", "--no-cache", "--output-format", "json", "--config", str(RUFF_CONFIG),
                           "--exit-zero", str(PACKAGE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=PACKAGE, timeout=300)
    assert proc.returncode == 0, proc.stderr
    by_area: dict = {}
    for finding in json.loads(proc.stdout or "[]"):
        path = Path(finding["filename"])
        where = f"{path.resolve().relative_to(PACKAGE)}:{finding['location']['row']}:{finding['location']['column']}"
        by_area.setdefault(_area_of(path), []).append(f"{where}: {finding['code']} {finding['message']}")
    return by_area


def test_lint_config_is_the_ament_rule_families_with_the_pep257_convention():
    text = RUFF_CONFIG.read_text()
    assert 'select = ["E", "W", "F", "D"]' in text
    assert 'convention = "pep257"' in text
    assert "line-length = 120" in text


@pytest.mark.parametrize("area", _areas())
def test_flake8_and_pep257_find_nothing(ruff_findings, area):
    findings = ruff_findings.get(area, [])
    assert not findings, f"{len(findings)} lint finding(s) in {area}:\n" + "\n".join(findings)


def test_every_finding_belongs_to_a_checked_area(ruff_findings):
    assert set(ruff_findings) <= set(_areas()), sorted(set(ruff_findings) - set(_areas()))


PACKAGE_XMLS = sorted(WORKSPACE_SRC.glob("*/package.xml"))


@pytest.mark.parametrize("package_xml", PACKAGE_XMLS, ids=[p.parent.name for p in PACKAGE_XMLS])
def test_package_xml_is_well_formed_per_xmllint(package_xml):
    xmllint = shutil.which("xmllint")
    if xmllint is None:
        pytest.skip("xmllint is not installed (Debian/Ubuntu: apt-get install libxml2-utils)")
    proc = subprocess.run([xmllint, "--noout", str(package_xml)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("package_xml", PACKAGE_XMLS, ids=[p.parent.name for p in PACKAGE_XMLS])
def test_package_xml_follows_package_format_3(package_xml):
    catkin_pkg = pytest.importorskip("catkin_pkg.package", reason="catkin_pkg is not installed (colcon brings it)")
    warnings: list = []
    package = catkin_pkg.parse_package(str(package_xml), warnings=warnings)
    package.validate(warnings=warnings)
    assert package.package_format == 3
    assert package.name == package_xml.parent.name
    assert not warnings, warnings
    text = package_xml.read_text()
    assert 'href="http://download.ros.org/schema/package_format3.xsd"' in text  # the schema xmllint would use
