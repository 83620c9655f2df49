"""How ``make test TEST_WORKERS=N`` shares the tests between pytest-xdist workers (``--dist loadgroup``).

- Every system test (the repository's ``test/``) is in one group, ``system``: they run one after another in one
  worker, as serially, because two whole station stacks at once overload 2 cores (README "Tests").
- Every other test file is a group of its own: a file's tests and its module fixtures stay in one worker
  (``--dist loadfile``'s rule), and the files go to whichever worker is free.

``scripts/test.sh`` lists ``test/`` first, so the ``system`` group is handed out first and runs beside the
package's files instead of after them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SYSTEM_GROUP = "system"
SYSTEM_TESTS = Path(__file__).resolve().parents[3] / "test"


def group_of(path: Path) -> str:
    """Return the xdist group of the test file at ``path``."""
    path = Path(path).resolve()
    if path == SYSTEM_TESTS or SYSTEM_TESTS in path.parents:
        return SYSTEM_GROUP
    return str(path)


def assign(items) -> None:
    """Mark each collected item with its group (an item already in a group keeps it)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group_of(Path(str(item.path)))))
