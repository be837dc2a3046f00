"""End to end: review_queue under Airflow (dag.test) against an S3 API on loopback, without a
Label Studio connection: the day's queue lands once (a re-run reuses it), nothing is sent or pulled."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.stages import Stores
from evaluation.stages.review import read_queues
from evaluation.testing import synthetic
from scripts import airflow_local

pytestmark = pytest.mark.e2e

RAW_URI = "s3://llm-logs/review-e2e"
OUTPUT_URI = "s3://llm-evaluation/review-e2e"
DAY = dt.date(2026, 3, 2)


@pytest.fixture(scope="module")
def landed_day(local_s3) -> None:
    synthetic.write_day(storage.open_store(RAW_URI, local_s3.access()), DAY, 60, bad=False)
    cfg = RunConfig(date=DAY, input_uri=RAW_URI, output_uri=OUTPUT_URI, run_id="r1", judges=["rag", "masis"])
    run_day(cfg, Stores.open(cfg, local_s3.access()))


def _trigger(conf: dict[str, Any]) -> Any:
    dag = airflow_local.load_dag("review_queue")
    return dag.test(logical_date=None, run_conf={"input_uri": RAW_URI, "output_uri": OUTPUT_URI, **conf})


def test_the_review_dag_queues_the_day_once_without_label_studio(airflow_db, local_s3, landed_day, monkeypatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_LABEL_STUDIO", raising=False)
    conf = {"date": DAY.isoformat(), "review_size": 15}
    dag_run = _trigger(conf)
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert airflow_local.xcom(dag_run, "pull") == {"landed": 0, "label_studio": False}
    assert airflow_local.xcom(dag_run, "send") == {"sent": 0, "label_studio": False}
    queued = airflow_local.xcom(dag_run, "queue")
    assert queued["queued"] == 15 and queued["day"] == DAY.isoformat() and not queued["reused"]
    out = storage.open_store(OUTPUT_URI, local_s3.access())
    queue = read_queues(out)
    assert queue.height == 15 and queue["record_id"].n_unique() == 15
    assert airflow_local.xcom(dag_run, "calibrate") == []  # no labels yet: nothing to calibrate on

    again = _trigger(conf)  # another run of the same day: a queue of its own, never a record twice
    assert str(again.state) == "success"
    assert read_queues(out)["record_id"].n_unique() == read_queues(out).height == 30
