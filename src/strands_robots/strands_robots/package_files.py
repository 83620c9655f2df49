"""Where this package's installed files are (``config/``, ``launch/``), found with or without ROS.

colcon (a copying install or ``--symlink-install``) and pip install them under the package's share directory,
``<prefix>/share/strands_robots``; a checkout has them beside the sources, in ``src/strands_robots``. A file is
looked for, first found wins:

1. the share directory of the prefix these modules are installed in (``<prefix>/lib/pythonX.Y/site-packages``
   -> ``<prefix>/share/strands_robots``): a copying colcon install, a pip install;
2. the checkout these modules are in (``src/strands_robots``, the real path of the sources): a run from the
   source tree, and ``--symlink-install``, whose build directory links to the sources;
3. the share directory the ament index names (``AMENT_PREFIX_PATH``), where ``ament_index_python`` is
   importable: an install elsewhere whose files are not beside these modules.

So the files are always those of the code that runs, and nothing needs ROS sourced. A file found nowhere is one
:class:`PackageFileNotFound` line naming every place looked in. No ROS import at module level.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

__all__ = ["PACKAGE", "PackageFileNotFound", "candidate_dirs", "checkout_dir", "config_dir",
           "config_path", "installed_share_dir",
           "package_file", "prefix_share_dir"]

PACKAGE = "strands_robots"
_PACKAGE_DIR = Path(os.path.abspath(os.path.dirname(__file__)))  # not resolved: an install's own path


class PackageFileNotFound(FileNotFoundError):
    """A package file is in none of the places it is looked for (the message names them)."""


def prefix_share_dir(module_dir: "str | os.PathLike[str]", package: str = PACKAGE) -> Optional[Path]:
    """Return ``<prefix>/share/<package>`` for a package directory under ``<prefix>/lib*/python*/*-packages``.

    None when ``module_dir`` is not in such a layout (a checkout, a build directory).
    """
    parts = Path(module_dir).parts
    for index in range(len(parts) - 1, 2, -1):
        if parts[index] in ("site-packages", "dist-packages") and parts[index - 1].startswith("python") \
                and parts[index - 2].startswith("lib"):
            return Path(*parts[:index - 2]) / "share" / package
    return None


def checkout_dir() -> Optional[Path]:
    """Return the checkout's ``src/strands_robots`` when these modules are in one (the real path), else None."""
    root = _PACKAGE_DIR.resolve().parent
    if (root / "package.xml").is_file() and (root / "setup.py").is_file():
        return root
    return None


def installed_share_dir() -> Optional[Path]:
    """Return the share directory the ament index names for this package, or None (no ament index, not found)."""
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(PACKAGE))
    except Exception:  # PackageNotFoundError, ValueError: not on AMENT_PREFIX_PATH
        return None


def candidate_dirs() -> List[Path]:
    """Return the directories a package file is looked for in, in order (see the module docstring)."""
    out: List[Path] = []
    for directory in (prefix_share_dir(_PACKAGE_DIR), checkout_dir(), installed_share_dir()):
        if directory is not None and directory not in out:
            out.append(directory)
    if not out:  # an unusual layout: the prefix of the running interpreter (pip's data_files go there)
        out.append(Path(sys.prefix) / "share" / PACKAGE)
    return out


def package_file(*relative: str) -> str:
    """Return the path of ``<share>/<relative...>`` (e.g. ``package_file("launch", "rollout.launch.py")``).

    :raises PackageFileNotFound: in none of :func:`candidate_dirs` (the message names every path tried).
    """
    tried = [directory.joinpath(*relative) for directory in candidate_dirs()]
    for path in tried:
        if path.is_file():
            return str(path)
    raise PackageFileNotFound(f"{PACKAGE} file {'/'.join(relative)} not found; looked in "
                              + ", ".join(str(p) for p in tried))


def config_dir(name: str) -> str:
    """Return the path of the package's ``config/<name>`` directory (:class:`PackageFileNotFound` when none)."""
    tried = [directory / "config" / name for directory in candidate_dirs()]
    for path in tried:
        if path.is_dir():
            return str(path)
    raise PackageFileNotFound(f"{PACKAGE} directory config/{name} not found; looked in "
                              + ", ".join(str(p) for p in tried))


def config_path(name: str) -> str:
    """Return the path of the package's ``config/<name>`` (:class:`PackageFileNotFound` when there is none)."""
    return package_file("config", name)
