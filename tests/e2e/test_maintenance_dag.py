"""End to end: evaluation_maintenance under Airflow (dag.test) against an S3 API on loopback: a
dry run deletes nothing, a real one deletes the working data past its retention and nothing else
(not an uncommitted object written just now, even with work_days 0: a landing may be under way)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from evaluation import storage
from scripts import airflow_local

pytestmark = pytest.mark.e2e

OUTPUT_URI = "s3://llm-evaluation/maintenance-e2e"
OLD_DAY = dt.date(2025, 1, 2)


def _trigger(conf: dict[str, Any]) -> Any:
    dag = airflow_local.load_dag("evaluation_maintenance")
    return dag.test(logical_date=None, run_conf={"output_uri": OUTPUT_URI, **conf})


def test_maintenance_applies_the_retention(airflow_db, local_s3) -> None:
    out = storage.open_store(OUTPUT_URI, local_s3.access())
    committed = storage.landing_key("evaluations", OLD_DAY, "r1")
    old = [storage.ledger_prefix(OLD_DAY) + "part-a.parquet", storage.claim_key(OLD_DAY)]
    kept = [committed, storage.legacy_key("evaluations", OLD_DAY - dt.timedelta(days=1)),  # landed before commits
            storage.landing_key("judge_calls", OLD_DAY, "r2"),  # uncommitted, but just written: a landing under way
            storage.ledger_prefix(dt.date.today()) + "part-b.parquet",
            storage.failed_key(OLD_DAY, "r1", "rejects.parquet")]  # written just now: 30 days to go
    for key in old + kept:
        out.write_bytes(key, b"bytes")
    storage.commit_day(out, OLD_DAY, "r1", {"evaluations": committed})
    kept.append(storage.commit_key(OLD_DAY))

    dry = _trigger({"dry_run": True, "work_days": 0})
    assert str(dry.state) == "success", airflow_local.task_states(dry)
    summary = airflow_local.xcom(dry, "apply_retention")
    assert summary["dry_run"] is True and summary["objects"] == 2 and set(summary["areas"]) == {"_ledger", "_claims"}
    assert {o.key for o in out.list("")} == set(old + kept)

    real = _trigger({"work_days": 0})
    assert str(real.state) == "success", airflow_local.task_states(real)
    assert airflow_local.xcom(real, "apply_retention")["objects"] == 2
    assert {o.key for o in out.list("")} == set(kept)
