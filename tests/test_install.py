"""The install check that the image build and airflow-init run (scripts/check_install.py): it
passes on this environment with the URLs of docker-compose.yml, and fails, naming the check, when
a configured driver is missing."""

from __future__ import annotations

import pytest

from scripts import check_install
from scripts.compose import AIRFLOW_COMMON, dev_variables, environment, load_compose


def test_every_check_passes_with_the_urls_of_docker_compose(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    env = environment(load_compose(dev_variables())[AIRFLOW_COMMON])
    for name in check_install.DEFAULT_URLS:
        assert env[name].split("://")[0] == check_install.DEFAULT_URLS[name].split("://")[0], name
        monkeypatch.setenv(name, env[name])
    assert check_install.main() == 0
    out = capsys.readouterr().out
    assert "ok      metadata DB driver: psycopg" in out
    assert "ok      async metadata DB driver: asyncpg" in out
    assert "ok      Celery result backend driver: psycopg" in out
    assert "ok      Celery broker transport: redis" in out
    assert "ok      import airflow.providers.celery.executors.celery_executor" in out


def test_a_missing_driver_fails_the_check_naming_it(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("AIRFLOW__CELERY__RESULT_BACKEND", "db+postgresql+pg8000://airflow:airflow@postgres/airflow")
    assert check_install.main() == 1
    captured = capsys.readouterr()
    assert "FAILED  Celery result backend driver: ModuleNotFoundError: No module named 'pg8000'" in captured.out
    assert "1 install check(s) failed" in captured.err
