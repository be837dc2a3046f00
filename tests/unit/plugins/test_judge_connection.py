"""The llm_judge connection's extra rpm / tpm as the default of judge_rpm / judge_tpm."""

from __future__ import annotations

import json

import pytest
from evaluation_airflow import judge_rate_limits


def test_rate_limits_from_the_connection_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "http", "host": "http://127.0.0.1:9/v1", "password": "k",
            "extra": {"rpm": 600, "tpm": "150000"}}
    monkeypatch.setenv("AIRFLOW_CONN_LLM_JUDGE", json.dumps(conn))
    assert judge_rate_limits() == {"judge_rpm": 600.0, "judge_tpm": 150000.0}


def test_no_connection_or_no_extra_means_no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_LLM_JUDGE", raising=False)
    assert judge_rate_limits() == {}
    conn = {"conn_type": "http", "extra": {"rpm": "lots", "tpm": 0}}
    monkeypatch.setenv("AIRFLOW_CONN_LLM_JUDGE", json.dumps(conn))
    assert judge_rate_limits() == {}  # not a number: ignored (logged); zero: none
