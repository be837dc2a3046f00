"""Shared fixtures. Airflow is pointed at a throw-away home before anything imports it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts import airflow_local

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="evaluation-airflow-"))
airflow_local.configure(_AIRFLOW_HOME)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Generated days are complete once written: runs do not wait out the production quiet period
# (the tests of the wait configure their own).
os.environ.setdefault("EVALUATION_QUIET_PERIOD_S", "0")
SYSTEM_TESTS = Path(__file__).parent / "system"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` collects the system tests from tests/system alone (collecting the whole tree
    costs each of its processes ~20 s of imports): one marked `system` elsewhere would run in
    neither part."""
    strays = [item.nodeid for item in items
              if item.get_closest_marker("system") and SYSTEM_TESTS not in item.path.parents]
    if strays:
        raise pytest.UsageError(f"marked system outside tests/system, so make test would run them nowhere: {strays}")


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated Airflow metadata DB (SQLite) with the llm_judge pool."""
    airflow_local.migrate()
    airflow_local.ensure_pool()
    return _AIRFLOW_HOME


@pytest.fixture(scope="session")
def local_s3() -> Iterator[object]:
    """An S3 API on loopback (moto server) with the demo buckets; the environment points at it."""
    from evaluation.testing.s3 import local_s3_environment

    with local_s3_environment("llm-logs", "llm-evaluation") as s3:
        yield s3
