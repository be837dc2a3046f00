# The two commands of the README: `make demo` and `make test`. Both set themselves up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PYTHONPATH := $(CURDIR):$(CURDIR)/plugins

.PHONY: help setup demo test lint bench clean lock

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-7s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed ## create .venv from the pinned requirements.txt and requirements-dev.txt

demo: setup ## run the daily DAG end to end on embedded S3 with the offline judge
	$(PY) -m scripts.demo

test: setup ## run the test suite (unit, DAG integrity, end to end)
	$(PY) -m pytest

lint: setup ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy evaluation

bench: setup ## run the benchmarks and print the table (bench/results/)
	$(PY) -m bench.run

lock: setup ## re-pin requirements.txt and requirements-dev.txt from the current environment
	$(PY) -m scripts.lock

clean: ## remove the virtualenv, local Airflow home and demo output
	rm -rf $(VENV) .airflow demo-output
