"""A run whose output is a directory is refused on an executor that spreads tasks over hosts."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from evaluation_airflow import refuse_local_output_when_distributed


@pytest.mark.parametrize("executor", ["CeleryExecutor", "KubernetesExecutor", "LocalExecutor,CeleryExecutor",
                                      "airflow.providers.celery.executors.celery_executor.CeleryExecutor"])
def test_a_directory_output_is_refused_on_a_distributed_executor(executor: str) -> None:
    with pytest.raises(AirflowFailException, match=r"output_uri '/data/out' is a directory.*s3://bucket/prefix"):
        refuse_local_output_when_distributed("/data/out", executor)


@pytest.mark.parametrize(("output_uri", "executor"), [
    ("s3://bucket/out", "CeleryExecutor"),
    ("s3://bucket/out", "KubernetesExecutor"),
    ("/data/out", "LocalExecutor"),
    ("/data/out", "SequentialExecutor"),
])
def test_s3_anywhere_and_a_directory_on_one_host_are_accepted(output_uri: str, executor: str) -> None:
    refuse_local_output_when_distributed(output_uri, executor)
