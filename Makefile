# The project's own commands. `make test` is what CI runs (.ci/run) and what the README tells you to run.
PYTHON ?= python3
VENV ?= .venv
CLIENTS_VENV ?= .venv-clients

.PHONY: install clients test lint demo clean

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

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/hadolint Dockerfile

test: install clients lint
	CVMJOB_CLIENTS_VENV=$(abspath $(CLIENTS_VENV)) $(VENV)/bin/pytest

demo: install
	$(VENV)/bin/cvmjob emulator seed jobs/quickstart/dataset cos://cvmjob-examples-1250000000/quickstart/
	$(VENV)/bin/cvmjob run jobs/quickstart/job.yaml

clean:
	rm -rf $(VENV) $(CLIENTS_VENV) .mypy_cache .ruff_cache .pytest_cache
