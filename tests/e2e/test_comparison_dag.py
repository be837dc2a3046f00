"""End to end: model_comparison under Airflow (dag.test) against an S3 API on loopback, over two
days landed by the pipeline."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.stages import Stores
from evaluation.testing import synthetic
from scripts import airflow_local

pytestmark = pytest.mark.e2e

DAYS = (dt.date(2026, 11, 10), dt.date(2026, 11, 11))
RECORDS = 300
INPUT_URI = "s3://llm-logs/compare-e2e-raw"
OUTPUT_URI = "s3://llm-evaluation/compare-e2e"
MODELS = ["assistant-lite", "assistant-v2"]


@pytest.fixture(scope="module")
def landed_days(local_s3) -> None:
    """Two days evaluated by the pipeline (offline judge) into the embedded S3."""
    s3_access = local_s3.access()
    for day in DAYS:
        synthetic.write_day(storage.open_store(INPUT_URI, s3_access), day, RECORDS)
        cfg = RunConfig(date=day, input_uri=INPUT_URI, output_uri=OUTPUT_URI, run_id=f"e2e-{day}")
        run_day(cfg, Stores.open(cfg, s3_access))


def _trigger(conf: dict[str, Any]) -> Any:
    dag = airflow_local.load_dag("model_comparison")
    return dag.test(logical_date=None, run_conf={"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, **conf})


def _comparison_keys(s3: Any, comparison_id: str) -> set[str]:
    out = storage.open_store(OUTPUT_URI, s3.access())
    prefix = storage.comparison_key(comparison_id, "")
    return {o.key.removeprefix(prefix) for o in out.list(prefix)}


def test_compare_landed_scores(airflow_db, local_s3, landed_days) -> None:
    dag_run = _trigger({"start_date": str(DAYS[0]), "end_date": str(DAYS[1]), "models": MODELS})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert states["rejudge"] == "skipped" and states["compare"] == "success"

    result = airflow_local.xcom(dag_run, "compare")
    assert result["source"] == "landed" and result["records_per_model"] == {m: 200 for m in MODELS}
    assert set(result) >= {"metrics_uri", "verdicts_uri", "report_uri", "spec_uri"}
    assert all(not isinstance(v, list) for v in result.values())  # URIs and counts, never tables
    comparison_id = result["comparison_id"]
    assert {"metrics.parquet", "verdicts.parquet", "spec.json", "report.html"} <= _comparison_keys(local_s3, comparison_id)

    out = storage.open_store(OUTPUT_URI, local_s3.access())
    metrics = storage.read_parquet(out, storage.comparison_key(comparison_id, "metrics.parquet"))
    score = metrics.filter((pl.col("judge") == "rag") & (pl.col("metric") == "score") & (pl.col("model") == "assistant-v2"))
    assert score["delta"][0] > 0 and score["delta_ci_low"][0] > 0 and score["test"][0] == "paired"
    page = out.read_bytes(storage.comparison_key(comparison_id, "report.html")).decode()
    assert "<svg" in page and "https://" not in page


def test_rejudge_a_sample_in_the_judge_pool(airflow_db, local_s3, landed_days) -> None:
    conf = {"start_date": str(DAYS[0]), "end_date": str(DAYS[1]), "models": MODELS, "baseline": "assistant-v2",
            "judges": ["rag", "masis"], "sample_per_model": 15, "seed": 5, "judge_model": "offline/lexical"}
    dag_run = _trigger(conf)
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert states["rejudge"] == "success" and states["compare"] == "success"
    assert airflow_local.load_dag("model_comparison").get_task("rejudge").pool == airflow_local.POOL

    judged = airflow_local.xcom(dag_run, "rejudge")
    assert judged["records"] == 30 and judged["rows"] == 60
    result = airflow_local.xcom(dag_run, "compare")
    assert result["source"] == "rejudged" and result["records_per_model"] == {m: 15 for m in MODELS}
    keys = _comparison_keys(local_s3, result["comparison_id"])
    assert {"evaluations.parquet", "judge_calls.parquet", "metrics.parquet", "verdicts.parquet", "report.html"} <= keys
    out = storage.open_store(OUTPUT_URI, local_s3.access())
    evaluations = storage.read_parquet(out, storage.comparison_key(result["comparison_id"], "evaluations.parquet"))
    assert evaluations.height == 60 and set(evaluations["judge"]) == {"rag", "masis"}
    assert not [o for o in out.list("_work/") if "comparison-" in o.key]


@pytest.mark.parametrize(
    "conf, fragment",
    [
        ({"models": ["assistant-v2"]}, "models"),
        ({"start_date": "11/10/2026"}, "start_date"),
        ({"judges": ["rag", "bogus"]}, "judges"),
        ({"sample_per_model": 0}, "sample_per_model"),
    ],
)
def test_params_refuse_a_bad_form(airflow_db, conf: dict[str, Any], fragment: str) -> None:
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(airflow_local.load_dag("model_comparison").params)
    good = {"start_date": str(DAYS[0]), "end_date": str(DAYS[1]), "models": MODELS, "output_uri": OUTPUT_URI}
    with pytest.raises(ParamValidationError) as error:
        for key, value in {**good, **conf}.items():
            params[key] = value
        params.validate()
    assert fragment in str(error.value)


def test_a_baseline_outside_the_models_fails_without_retry(airflow_db, local_s3, landed_days) -> None:
    dag_run = _trigger({"start_date": str(DAYS[0]), "end_date": str(DAYS[1]), "models": MODELS,
                        "baseline": "assistant-v9"})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "failed"
    assert states["build_spec"] == "failed", states
