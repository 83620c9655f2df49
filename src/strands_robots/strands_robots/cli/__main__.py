"""``python -m strands_robots.cli``: the same as the ``strands-robots`` console script."""

import sys

from strands_robots.cli import main

sys.exit(main())
