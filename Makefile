# Entry points. Each runs the set-up first (idempotent, quick when nothing changed).
# ROS=kilted (default: the Kilted wheels, Python 3.11) or ROS=jazzy (the Jazzy wheels, Python 3.12); a sourced
# distro (ROS_DISTRO set) wins. Each distro has its own venv, build and install folders (scripts/layout.sh).
ROS ?= kilted
export ROS
.PHONY: setup run test test-fast test-all bench clean

setup:
	bash scripts/setup.sh

run:
	bash scripts/run.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)

# The core unit tests only: no ROS process, no DDS, no server (src/strands_robots/test/fast_tests.py).
test-fast:
	STRANDS_ROBOTS_TEST_FAST=1 bash scripts/test.sh $(ARGS)

# Both legs, as CI runs them.
test-all:
	ROS=kilted bash scripts/test.sh $(ARGS)
	ROS=jazzy bash scripts/test.sh $(ARGS)

bench:
	bash scripts/bench.sh $(ARGS)

clean:
	rm -rf build install log build-jazzy install-jazzy log-jazzy
