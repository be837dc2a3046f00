"""
### evaluation_maintenance

Every day, applies the retention of working data under the output root (CONTRACT §3):

**apply_retention** lists what the retention lets go: a failed or dead run's `_work/` folder
after `work_days`, a failed run's evidence under `_failed/` after `failed_days`, a day's ledger
and claim once `dt` is more than `ledger_days` old, and after `work_days` an object of a day
table that no day's commit record names (left by a landing that died). It deletes exactly the
listed objects (never a whole prefix, so what a run writes meanwhile stays), unless `dry_run` is
on, and logs every folder with its objects and bytes. One task: the list of keys never travels
through XCom.

What a day's commit record names, reports, comparisons, calibrations and `runs` are never
deleted. The same
collection runs without Airflow as `python -m evaluation gc` (a dry run unless `--apply`).
S3 is reached through the `aws_default` connection.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import Any

import evaluation_airflow as glue
from airflow.sdk import Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from evaluation.contract.config import Retention
from evaluation.contract.options import RETENTION_OPTIONS, read_options

logger = logging.getLogger(__name__)


@dag(
    dag_id="evaluation_maintenance",
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["llm-evaluation", "maintenance"],
    doc_md=__doc__,
    params={**glue.form_params(RETENTION_OPTIONS),
            "output_uri": Param("", type="string", title="Output URI",
                                description="Root of the landed tables; empty: $EVALUATION_OUTPUT_URI."),
            "dry_run": Param(False, type="boolean", title="Dry run", description="List what would go; delete nothing.")},
    default_args={"retries": 2, "retry_delay": dt.timedelta(minutes=5)},
)
def evaluation_maintenance() -> None:
    @task
    def apply_retention() -> dict[str, Any]:
        # Polars: DAG files must parse light
        from evaluation.storage import retention

        params = glue.check_conf(get_current_context())
        output_uri = params.get("output_uri") or os.environ.get("EVALUATION_OUTPUT_URI", "")
        if not output_uri:
            raise AirflowFailException("set output_uri (or EVALUATION_OUTPUT_URI)")
        with glue.fail_without_retry(ValueError, prefix="invalid retention: "):
            policy = Retention.model_validate(read_options(RETENTION_OPTIONS, params))
        (store,) = glue.open_stores(output_uri)
        plan = retention.collect(store, policy, now=dt.datetime.now(dt.UTC))
        if not params.get("dry_run"):
            retention.apply(store, plan)
        for line in retention.describe(plan, applied=not params.get("dry_run")):
            logger.info("%s", line)
        return {"output_uri": output_uri, "dry_run": bool(params.get("dry_run")), "objects": plan.objects,
                "bytes": plan.bytes, "areas": plan.by_area()}

    apply_retention()


evaluation_maintenance()
