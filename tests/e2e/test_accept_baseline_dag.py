"""End to end: ``accept_baseline`` is a run option of daily_evaluation under Airflow (dag.test) on
embedded S3: given in the run's conf (the Params form, REST) or, left empty, by the variable every
run option falls back to, it makes the day's report take a regressed model's new level as its
baseline; a value that is not MODEL=YYYY-MM-DD fails the run naming the option."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from evaluation import storage
from evaluation.contract.options import env_name
from evaluation.testing import synthetic
from scripts import airflow_local

pytestmark = pytest.mark.e2e

INPUT_URI = "s3://llm-logs/accept"
OUTPUT_URI = "s3://llm-evaluation/accept"
DAYS = (dt.date(2026, 9, 7), dt.date(2026, 9, 8), dt.date(2026, 9, 9))
DEGRADED_MODEL = "assistant-v2"
RECORDS = 120
VARIABLE = env_name("accept_baseline")


def _degrade(line: str) -> str:
    """The degraded model's answer loses its grounding: a figure and claims no context holds."""
    record = json.loads(line)
    if record["model"] == DEGRADED_MODEL:
        record["answer"] = ("Independent surveys published decades ago reported a remarkably different "
                            "figure of 12 units, which textbooks widely repeat.")
    return json.dumps(record)


def _conf(**extra: Any) -> dict[str, Any]:
    return {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, "judge_model": "offline/lexical", "chunk_size": 200,
            **extra}


def _line(s3: Any, day: dt.date) -> tuple[dict[str, Any], dict[str, Any]]:
    """The degraded model's headline line of the day's summary.json, and the summary's policy."""
    summary = storage.read_json(storage.open_store(OUTPUT_URI, s3.access()), storage.report_key(day, "summary.json"))
    return next(line for line in summary["headline"] if line["model"] == DEGRADED_MODEL), summary["method"]["alerts"]


def _run(day: dt.date, conf: dict[str, Any]) -> Any:
    dag_run = airflow_local.run_dag("daily_evaluation", day, conf)
    assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
    return dag_run


def test_accept_baseline_is_a_run_option_with_its_variable(airflow_db, local_s3, monkeypatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    raw = storage.open_store(INPUT_URI, local_s3.access())
    for day in DAYS:
        lines = synthetic.generate_day(day, RECORDS, bad=False)
        lines = [_degrade(line) for line in lines] if day == DAYS[-1] else lines
        raw.write_bytes(f"dt={day.isoformat()}/part-000.jsonl", ("\n".join(lines) + "\n").encode())
    for day in DAYS:
        _run(day, _conf())
    line, policy = _line(local_s3, DAYS[-1])
    assert line["status"] == "regressed" and policy["accept_baseline"] == {}

    # in the run's conf: the model's days from that date on are its baseline, none of them earlier
    accepted = f"{DEGRADED_MODEL}={DAYS[-1].isoformat()}"
    _run(DAYS[-1], _conf(accept_baseline=accepted))
    line, policy = _line(local_s3, DAYS[-1])
    assert (line["status"], line["text"]) == ("no_baseline", "no baseline")
    assert policy["accept_baseline"] == {DEGRADED_MODEL: DAYS[-1].isoformat()}

    # left empty in the conf: the worker's variable
    _run(DAYS[-1], _conf())
    assert _line(local_s3, DAYS[-1])[0]["status"] == "regressed"
    monkeypatch.setenv(VARIABLE, accepted)
    _run(DAYS[-1], _conf(accept_baseline=""))
    line, policy = _line(local_s3, DAYS[-1])
    assert line["status"] == "no_baseline" and policy["accept_baseline"] == {DEGRADED_MODEL: DAYS[-1].isoformat()}


def test_a_malformed_accept_baseline_fails_the_run_naming_it(airflow_db, local_s3, monkeypatch, capfd) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    dag_run = airflow_local.run_dag("daily_evaluation", DAYS[0], _conf(accept_baseline=f"{DEGRADED_MODEL}=yesterday"))
    assert str(dag_run.state) == "failed"
    assert airflow_local.task_states(dag_run)["check_run"] == "failed"
    output = "".join(capfd.readouterr())  # dag.test() logs the task's failure to the console
    assert "accept_baseline" in output and "'yesterday' of assistant-v2 is not a date (YYYY-MM-DD)" in output
