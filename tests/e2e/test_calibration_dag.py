"""End to end: judge_calibration under Airflow (dag.test) against an S3 API on loopback, on a golden
set stored where the logs are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from scripts import airflow_local

pytestmark = pytest.mark.e2e

GOLDEN_ROOT = "s3://llm-logs/golden"
OUTPUT_URI = "s3://llm-evaluation/calibration-e2e"
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "golden"


@pytest.fixture(scope="module")
def golden_sets(local_s3) -> None:
    """Two small sets from the shipped ones: a clean one and one with too many bad labels."""
    root = storage.open_store(GOLDEN_ROOT, local_s3.access())
    lines = (SHIPPED / "begin-wow" / "records.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    root.write_bytes("begin-small/records.jsonl", ("\n".join(lines) + "\n").encode())
    root.write_bytes("begin-small/set.json", (SHIPPED / "begin-wow" / "set.json").read_bytes())
    broken = [json.loads(line) for line in lines[:20]]
    for record in broken[:5]:
        record["labels"] = {"faithful": "maybe"}
    root.write_bytes("broken/records.jsonl", "".join(json.dumps(r) + "\n" for r in broken).encode())


def _trigger(conf: dict[str, Any]) -> Any:
    dag = airflow_local.load_dag("judge_calibration")
    return dag.test(logical_date=None, run_conf={"golden_uri": GOLDEN_ROOT, "output_uri": OUTPUT_URI, **conf})


def test_calibrate_a_golden_set_in_the_judge_pool(airflow_db, local_s3, golden_sets) -> None:
    conf = {"golden_set": "begin-small", "judges": ["rag", "masis"], "seed": 3}
    dag_run = _trigger(conf)
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert airflow_local.load_dag("judge_calibration").get_task("judge").pool == airflow_local.POOL

    judged = airflow_local.xcom(dag_run, "judge")
    assert judged["records"] == 40 and judged["rows"] == 80 and judged["rejected"] == 0
    result = airflow_local.xcom(dag_run, "calibrate")
    assert all(not isinstance(v, (list, dict)) for v in result.values())  # URIs and counts, never tables
    out = storage.open_store(OUTPUT_URI, local_s3.access())
    prefix = storage.calibration_key(result["calibration_id"], "")
    assert {"calibration.parquet", "report.html", "spec.json", "evaluations.parquet", "judge_calls.parquet",
            "labels.parquet", "rejects.parquet", "validation.json"} <= {o.key.removeprefix(prefix) for o in out.list(prefix)}
    table = storage.read_parquet(out, storage.calibration_key(result["calibration_id"], "calibration.parquet"))
    assert table.height == 10 and set(table["judge"]) == {"rag", "masis"}
    assert table.filter(pl.col("metric") == "score")["auroc"].min() > 0.5
    page = out.read_bytes(result["report_uri"].removeprefix(out.root + "/")).decode()
    assert "<svg" in page and "begin-small" in page
    assert not [o for o in out.list("_work/") if "calibration-" in o.key]

    again = _trigger(conf)  # the same form: the same calibration, every reply from the ledger
    assert str(again.state) == "success"
    assert airflow_local.xcom(again, "judge")["calls_made"] == 0
    assert airflow_local.xcom(again, "calibrate")["calibration_id"] == result["calibration_id"]


def test_a_set_with_too_many_bad_labels_fails_without_retry(airflow_db, local_s3, golden_sets) -> None:
    dag_run = _trigger({"golden_set": "broken", "judges": ["rag"]})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "failed"
    assert states["judge"] == "failed" and states["calibrate"] == "upstream_failed", states


@pytest.mark.parametrize(
    "conf, fragment",
    [
        ({}, "golden_set"),
        ({"golden_set": "../escape"}, "golden_set"),
        ({"golden_set": "begin-small", "judges": ["rag", "bogus"]}, "judges"),
        ({"golden_set": "begin-small", "seed": -1}, "seed"),
        ({"golden_set": "begin-small", "pass_threshold": 2}, "pass_threshold"),
    ],
)
def test_params_refuse_a_bad_form(airflow_db, conf: dict[str, Any], fragment: str) -> None:
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(airflow_local.load_dag("judge_calibration").params)
    with pytest.raises(ParamValidationError) as error:
        for key, value in conf.items():
            params[key] = value
        params.validate()
    assert fragment in str(error.value)
