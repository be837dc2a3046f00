# The two commands of the README: `make demo` and `make test`. Both set themselves up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PYTHONPATH := $(CURDIR):$(CURDIR)/plugins

.PHONY: help setup labelstudio chromium compose tools demo test lint bench clean lock

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-7s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $$(grep -E '^uv==' requirements-dev.txt)
	$(VENV)/bin/uv pip install --python $(PY) --quiet --compile-bytecode -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed ## create .venv from the pinned requirements.txt and requirements-dev.txt (installed by uv)

# Label Studio (the review round trip's system test) in a virtualenv of its own: it does not install
# beside Airflow.
LABEL_STUDIO_VENV := .venv-labelstudio

$(LABEL_STUDIO_VENV)/.installed: requirements-labelstudio.txt | $(VENV)/.installed
	$(VENV)/bin/uv venv --quiet --python $(PYTHON) $(LABEL_STUDIO_VENV)
	$(VENV)/bin/uv pip install --python $(LABEL_STUDIO_VENV)/bin/python --quiet -r requirements-labelstudio.txt
	touch $@

labelstudio: $(LABEL_STUDIO_VENV)/.installed ## create .venv-labelstudio from requirements-labelstudio.txt (the review system test's Label Studio)

demo: setup ## run the daily DAG end to end on embedded S3 with the offline judge
	$(PY) -m scripts.demo

# Debian packages (commands) installed in one apt-get run when missing, as root; otherwise says
# which test will skip. $(1): the packages, $(2): what skips without them.
define debian
	@missing=""; for pkg in $(1); do command -v $$pkg >/dev/null || missing="$$missing $$pkg"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "$$missing missing and cannot be installed here (needs root and apt-get): $(2) will skip"; exit 0; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	  || echo "apt-get could not install$$missing: $(2) will skip"
endef

chromium: ## install Debian's chromium for the browser test (as root; says why it cannot otherwise)
	$(call debian,chromium,the browser test)

compose: ## install Debian's docker-compose, which validates docker-compose.yml without a daemon (as root)
	$(call debian,docker-compose,its tests)

# What the suite needs beyond .venv: both packages in one apt-get run (one index update).
tools:
	$(call debian,chromium docker-compose,the browser test and compose's tests)

# The suite in two parts that run side by side. The system tests (the deployed topology, the
# Celery worker's preload, Label Studio) mostly wait on the processes they start: they run on
# SYSTEM_WORKERS processes (pytest-xdist, one test file to a process; only tests/system is
# collected, where tests/conftest.py keeps every test marked system) once Label Studio's virtualenv
# is installed, their output kept in $(VENV)/system-tests.log and printed after the rest. All the
# other tests run meanwhile on TEST_WORKERS processes (one test file to a process: a module's shared
# set-up runs once; a process per core, as each pays its own Airflow database and imports) at a
# lower CPU priority (nice), so they take the CPU the system tests leave idle and hardly slow the
# deployment those measure. The target fails when either part does.
TEST_WORKERS ?= 2
SYSTEM_WORKERS ?= 3

test: setup tools ## run the test suite (unit, DAG integrity, end to end, the deployed topology, the browser)
	@rc=0; \
	{ make --no-print-directory labelstudio || exit 1; \
	  $(PY) -m pytest -n $(SYSTEM_WORKERS) --dist loadfile -m system tests/system; } > $(VENV)/system-tests.log 2>&1 & system=$$!; \
	echo "the system tests run beside these (their output, printed after: $(VENV)/system-tests.log)"; \
	nice -n 10 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not system" || rc=$$?; \
	echo "--- the system tests ($(VENV)/system-tests.log):"; \
	wait $$system || rc=1; \
	cat $(VENV)/system-tests.log; \
	exit $$rc

lint: setup ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy evaluation plugins dags scripts bench

bench: setup ## run the benchmarks and print the table (bench/results/)
	$(PY) -m bench.run

lock: setup ## re-pin requirements.txt and requirements-dev.txt from the current environment
	$(PY) -m scripts.lock

clean: ## remove the virtualenv, local Airflow home and demo output
	rm -rf $(VENV) $(LABEL_STUDIO_VENV) .airflow demo-output
