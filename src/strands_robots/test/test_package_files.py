"""The package's files are found where its modules are: an install's prefix, the checkout, the ament index."""

from __future__ import annotations

from pathlib import Path

import pytest

from strands_robots import package_files
from strands_robots.package_files import PackageFileNotFound, config_path, package_file, prefix_share_dir

CHECKOUT = Path(__file__).resolve().parent.parent  # src/strands_robots


@pytest.mark.parametrize("module_dir, share", [
    ("/opt/ros/kilted/lib/python3.12/site-packages/strands_robots", "/opt/ros/kilted/share/strands_robots"),
    ("/ws/install/strands_robots/lib/python3.11/site-packages/strands_robots",
     "/ws/install/strands_robots/share/strands_robots"),
    ("/usr/lib/python3/dist-packages/strands_robots", "/usr/share/strands_robots"),
    ("/venv/lib64/python3.10/site-packages/strands_robots/", "/venv/share/strands_robots"),
])
def test_an_installed_package_directory_maps_to_its_prefix_share_directory(module_dir, share):
    assert prefix_share_dir(module_dir) == Path(share)


@pytest.mark.parametrize("module_dir", ["/ws/src/strands_robots/strands_robots", "/ws/build/strands_robots/x",
                                        "/site-packages/strands_robots"])
def test_a_checkout_or_build_directory_is_no_install_prefix(module_dir):
    assert prefix_share_dir(module_dir) is None


def test_in_a_checkout_the_config_files_are_the_checkouts_own():
    assert package_files.checkout_dir() == CHECKOUT
    for name in ("rollout.yaml", "station.yaml", "cameras.yaml", "arms.yaml", "demo_job.yaml", "relay.yaml"):
        assert config_path(name) == str(CHECKOUT / "config" / name)
    assert package_file("launch", "rollout.launch.py") == str(CHECKOUT / "launch" / "rollout.launch.py")


def test_a_missing_file_is_one_error_naming_every_place_looked_in():
    with pytest.raises(PackageFileNotFound) as missing:
        config_path("no_such_file.yaml")
    text = str(missing.value)
    assert text.startswith("strands_robots file config/no_such_file.yaml not found; looked in ")
    for directory in package_files.candidate_dirs():
        assert str(directory / "config" / "no_such_file.yaml") in text
