# Entry points. Each runs the set-up first (idempotent, quick when nothing changed).
.PHONY: setup run test bench clean

setup:
	bash scripts/setup.sh

run:
	bash scripts/run.sh $(ARGS)

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh $(ARGS)

clean:
	rm -rf build install log
