"""``python -m strands_robots.client.cli``: ``strands-eval``."""

import sys

from strands_robots.client.cli import main

sys.exit(main())
