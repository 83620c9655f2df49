"""``python -m strands_robots.relay --listen ... --store ... --tokens ...`` (see server.main)."""

import sys

from strands_robots.relay.server import main

sys.exit(main())
