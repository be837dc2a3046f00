"""The batch trigger reads the judge's key from its Connection: only a Connection that does not
exist falls back to the environment's key; any other failure to read it is the trigger's error."""

from __future__ import annotations

import asyncio

import pytest
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from evaluation_batch import BatchTrigger


def _trigger() -> BatchTrigger:
    return BatchTrigger(["batch-1"], "openai/gpt-4o-mini", "http://127.0.0.1:9/v1")


def test_a_missing_connection_falls_back_to_the_environments_key(monkeypatch: pytest.MonkeyPatch) -> None:
    async def missing(conn_id: str) -> object:
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(BaseHook, "aget_connection", staticmethod(missing))
    monkeypatch.setenv("EVALUATION_JUDGE_API_KEY", "sk-from-the-environment")
    assert asyncio.run(_trigger()._api_key()) == ("sk-from-the-environment", "http://127.0.0.1:9/v1")


def test_a_connection_that_cannot_be_read_is_an_error_not_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unreadable(conn_id: str) -> object:
        raise RuntimeError("the secrets backend did not answer")

    monkeypatch.setattr(BaseHook, "aget_connection", staticmethod(unreadable))
    monkeypatch.setenv("EVALUATION_JUDGE_API_KEY", "sk-from-the-environment")
    with pytest.raises(RuntimeError, match="secrets backend did not answer"):
        asyncio.run(_trigger()._api_key())
