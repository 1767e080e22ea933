# The project's own commands. `make test` is what CI runs (.ci/run) and what the README tells you to run.
PYTHON ?= python3
VENV ?= .venv
CLIENTS_VENV ?= .venv-clients

.PHONY: install clients postgres chromium test test-fast lint demo clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[train,dev]'
	touch $@

# tccli and coscmd pull the monolithic Tencent SDK (~400 MB); they live in their own virtualenv so it never
# leaks into the product's dependencies. Pinned to the versions shared/reference/client-recipes.md probed.
$(CLIENTS_VENV)/.installed:
	$(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/pip install -q 'tccli==3.1.189.1' 'coscmd==1.9.0.6'
	touch $@

install: $(VENV)/.installed
clients: $(CLIENTS_VENV)/.installed

# Debian's PostgreSQL server binaries for the `postgres` tests (tests/postgres.py starts and removes its own
# throwaway cluster; nothing here starts a server). Installed only when no initdb is there yet; needs root.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	fi

# Debian's Chromium for the sweep report's browser test (tests/unit/sweep/test_report.py opens the report headless
# and checks that its plots rendered). Installed only when none is there yet and make runs as root with apt-get;
# elsewhere that test skips without it, except under CI (CI set), where a missing chromium fails it.
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else \
			echo "no chromium, and not root on Debian: the sweep report's browser test skips (fails under CI)"; \
		fi; \
	fi

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/hadolint Dockerfile

# The whole suite, on pytest-xdist workers: most tests wait on processes and servers more than they compute, so
# more workers than the two cores CI has (docs/testing.md has the measurements). Each worker has its own
# emulators and stores; the fault suite stays on one (tests/conftest.py) and runs the crash points and the fault
# matrix on SQLite and on PostgreSQL. --durations: where the time went, in every CI log.
PYTEST_WORKERS ?= 3
test: install clients postgres chromium lint
	CVMJOB_CLIENTS_VENV=$(abspath $(CLIENTS_VENV)) $(VENV)/bin/pytest -n $(PYTEST_WORKERS) \
		--durations=25

# The inner loop: unit, emulator and agent tests, no end-to-end runs, no fault suite, no benchmarks (minutes).
test-fast: install
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) -m "not e2e and not benchmark" \
		tests/unit tests/emulator tests/agent

demo: install
	$(VENV)/bin/cvmjob emulator seed jobs/quickstart/dataset cos://cvmjob-examples-1250000000/quickstart/
	$(VENV)/bin/cvmjob run jobs/quickstart/job.yaml

clean:
	rm -rf $(VENV) $(CLIENTS_VENV) .mypy_cache .ruff_cache .pytest_cache
