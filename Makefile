# The two commands a fresh machine needs (see README):
#   make demo   set up, then run the main job end to end, writing reports to out/
#   make test   set up, then run the whole test suite
#   make check  set up, then the fast subset of the tests (those not marked slow), with the
#               15 slowest named: the loop while working (under 90 s on an idle 2-core machine)
.PHONY: demo test check setup native bench clean

setup:
	@scripts/setup.sh

demo: setup
	@scripts/demo.sh

test: setup
	.venv/bin/python -m pytest -q $(PYTEST_ARGS)

check: setup
	.venv/bin/python -m pytest -q -m "not slow" --durations=15 $(PYTEST_ARGS)

native: setup
	.venv/bin/ninja -C build/editable

bench: setup
	@scripts/bench-env.sh
	@for b in bench/[a-z]*.py; do echo "== $$b"; PATH="$(CURDIR)/.venv-bench/bin:$$PATH" .venv-bench/bin/python $$b || exit 1; done

clean:
	rm -rf build dist src/corecast/_native out .venv/.corecast-setup .venv-bench/.corecast-setup
