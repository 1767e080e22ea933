# The project's own commands. `make test` is what CI runs (.ci/run) and what the README tells you to run.
PYTHON ?= python3
VENV ?= .venv
CLIENTS_VENV ?= .venv-clients

.PHONY: install clients system postgres chromium test test-fast lint demo clean

# --no-compile: Python compiles a module when it is first imported, and the tests import a small part of what is
# installed (of torch's and the monolithic SDK's thousands of files): compiling all of it at install took 90 of the
# two virtualenvs' 110 s of CPU (docs/testing.md). The tests run with bytecode written (below), so each module is
# compiled once, by the first process that imports it.
PIP_INSTALL = pip install -q --no-compile

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/$(PIP_INSTALL) --upgrade pip
	$(VENV)/bin/$(PIP_INSTALL) -e '.[dev]'  # dev pulls every extra (all): the suite exercises each
	touch $@

# tccli and coscmd pull the monolithic Tencent SDK (~400 MB); they live in their own virtualenv so it never
# leaks into the product's dependencies. Pinned to the versions shared/reference/client-recipes.md probed.
$(CLIENTS_VENV)/.installed:
	$(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/$(PIP_INSTALL) 'tccli==3.1.189.1' 'coscmd==1.9.0.6'
	touch $@

install: $(VENV)/.installed
clients: $(CLIENTS_VENV)/.installed

# What the tests need from Debian, in one apt-get (two would fight over dpkg's lock when make runs them side by
# side): PostgreSQL's server binaries for the `postgres` tests (tests/postgres.py starts and removes its own
# throwaway cluster; nothing here starts a server), Chromium for the sweep report's browser test
# (tests/unit/sweep/test_report.py opens the report headless and checks that its plots rendered), a C compiler for
# the emulator's security groups between instances (emulator/runtime/netfilter.py), and Podman with runc, which the
# emulator's instances run their containers with (tests/containers.py builds the test image from Debian's packages
# with apt-get download). Only what is missing, only as root with apt-get; elsewhere the browser and container
# tests skip without them, except under CI (CI set), where a missing one fails them.
system:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v "$${CC:-cc}" >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	command -v runc >/dev/null 2>&1 || missing="$$missing runc"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else \
			echo "missing:$$missing, and not root on Debian: install them, or the tests that need them fail or skip"; \
		fi; \
	fi
postgres chromium: system

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/hadolint Dockerfile

# The whole suite, on pytest-xdist workers: most tests wait on processes and servers more than they compute, so
# more workers than the two cores CI has (docs/testing.md has the measurements). Each worker has its own
# emulators and stores; the fault suite stays on one (tests/conftest.py) and runs the crash points and the fault
# matrix on SQLite and on PostgreSQL. --durations: where the time went, in every CI log.
# The two virtualenvs and Debian's packages install side by side, and the linters run beside the tests (their
# report follows the tests'); either failing fails `make test`.
PYTEST_WORKERS ?= 3
LINT_LOG = $(VENV)/lint.log
# The package's bytecode is compiled first, and the tests write the rest's as they import it: where
# PYTHONDONTWRITEBYTECODE is set (the development machines' image sets it) no process writes it, and each of the
# suite's cvmjob, emulator and controller processes compiled all it imported again (a fifth of a second of CPU for
# each `cvmjob` call; with the virtualenvs installed --no-compile, 400 s more in a run). An empty value turns the
# variable off. compileall skips what is up to date.
COMPILE = $(VENV)/bin/python -m compileall -q orchestrator crc64ecma
WRITE_BYTECODE = PYTHONDONTWRITEBYTECODE=
test:
	@$(MAKE) --no-print-directory -j3 install clients system
	@$(COMPILE)
	@$(MAKE) --no-print-directory lint >$(LINT_LOG) 2>&1 & linting=$$!; \
	$(WRITE_BYTECODE) CVMJOB_CLIENTS_VENV=$(abspath $(CLIENTS_VENV)) $(VENV)/bin/pytest -n $(PYTEST_WORKERS) \
		--durations=25; \
	tested=$$?; wait $$linting; linted=$$?; \
	echo "--- make lint:"; cat $(LINT_LOG); \
	if [ $$tested != 0 ]; then exit $$tested; fi; exit $$linted

# The inner loop: unit, emulator and agent tests, no end-to-end runs, no fault suite, no benchmarks (minutes).
test-fast: install
	@$(COMPILE)
	$(WRITE_BYTECODE) $(VENV)/bin/pytest -n $(PYTEST_WORKERS) -m "not e2e and not benchmark" \
		tests/unit tests/emulator tests/agent

demo: install
	$(VENV)/bin/cvmjob emulator seed jobs/quickstart/dataset cos://cvmjob-examples-1250000000/quickstart/
	$(VENV)/bin/cvmjob run jobs/quickstart/job.yaml

clean:
	rm -rf $(VENV) $(CLIENTS_VENV) .mypy_cache .ruff_cache .pytest_cache
