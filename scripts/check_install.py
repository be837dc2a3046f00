"""Fail an install that would crash at start: import what the scheduler, the Celery worker and the
judge tasks import, and load the database drivers that the configured URLs name.

Run by the image build (Dockerfile), by airflow-init before it migrates, and by the tests with the
environment of docker-compose.yml. The URLs come from Airflow's own variables; without them, the
schemes docker-compose.yml uses. Exits 1 naming every check that failed.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from collections.abc import Callable

DEFAULT_URLS = {
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg://airflow:airflow@postgres:5432/airflow",
    "AIRFLOW__CELERY__RESULT_BACKEND": "db+postgresql+psycopg://airflow:airflow@postgres:5432/airflow",
    "AIRFLOW__CELERY__BROKER_URL": "redis://:@redis:6379/0",
}

#: Modules the components and the tasks import (the executor class, providers, the pipeline).
MODULES = (
    "airflow.providers.celery.executors.celery_executor",
    "airflow.providers.amazon.aws.hooks.s3",
    "airflow.providers.smtp.hooks.smtp",
    "airflow.providers.http.hooks.http",
    "great_expectations",
    "polars",
    "boto3",
    "evaluation.stages",
    "evaluation.calling.client",
)


def _url(name: str) -> str:
    return os.environ.get(name) or DEFAULT_URLS[name]


def _driver(url: str) -> str:
    """Load the DBAPI module of a SQLAlchemy URL; returns its name."""
    from sqlalchemy.engine import make_url

    dialect = make_url(url).get_dialect()
    dbapi = dialect.import_dbapi()
    if not hasattr(dbapi, "__name__"):  # an async dialect's adapter around its driver module
        dbapi = getattr(dbapi, dialect.driver)
    return str(dbapi.__name__)


def _async_metadata_db() -> str:
    # Airflow opens the metadata DB a second time through an async engine (asyncpg for Postgres),
    # and fails at import when that driver is missing.
    from airflow import settings

    return _driver(settings._get_async_conn_uri_from_sync(_url("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")))


def _broker() -> str:
    from kombu import Connection

    transport = Connection(_url("AIRFLOW__CELERY__BROKER_URL")).transport
    return f"{transport.driver_name} {transport.driver_version()}"  # imports redis-py for redis://


def _imported(module: str) -> str:
    return importlib.import_module(module).__name__


def checks() -> dict[str, Callable[[], str]]:
    """Every check by name; each returns what it found or raises."""
    return {
        **{f"import {module}": functools.partial(_imported, module) for module in MODULES},
        "metadata DB driver": lambda: _driver(_url("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")),
        "async metadata DB driver": _async_metadata_db,
        "Celery result backend driver": lambda: _driver(_url("AIRFLOW__CELERY__RESULT_BACKEND").removeprefix("db+")),
        "Celery broker transport": _broker,
    }


def main() -> int:
    """Run every check; print one line each."""
    logging.getLogger("great_expectations").setLevel(logging.WARNING)  # else hundreds of INFO lines
    failed = 0
    for name, check in checks().items():
        try:
            print(f"ok      {name}: {check()}")
        except Exception as exc:  # noqa: BLE001 - every failure is reported, then the exit code says it
            failed += 1
            print(f"FAILED  {name}: {type(exc).__name__}: {exc}")
    if failed:
        print(f"{failed} install check(s) failed: this installation would crash at start", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
