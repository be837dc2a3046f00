"""
### judge_calibration

Measures how far the judges agree with people, on demand (trigger it with the form): a *golden set*
is a folder of input records that carry human labels (`docs/golden-sets.md`), under
`{golden_uri}/<set name>/`.

1. **build_spec** — checks the form (set, judges, judge model, seed, thresholds) and names the
   calibration (a hash of the form and the judges' prompt versions: triggering the same form again
   replaces the same calibration).
2. **judge** — in the `llm_judge` pool: reads and validates the set (the daily row rules and the
   labels' own; rejects land with every reason), then judges its records with the judge model
   through the daily stages, client and ledger, so a retry or a re-run pays only for calls not made
   yet; fails without retry when the set breaks a set-level rule or the model cannot be used.
3. **calibrate** — per judge and metric: status rates, AUROC with a 95% bootstrap interval,
   Spearman, Cohen's κ and F1 of `fail` against the labels, the confusion matrix, and the
   thresholds that maximise κ, fitted on one split and measured on the held-out rest; lands
   `calibrations/calibration_id=<id>/` (`calibration.parquet`, `report.html` with a ROC curve per
   judge, `spec.json` and the judged rows).

Only URIs and counts travel through XCom. Secrets come from the `aws_default` and `llm_judge`
Connections. The same calibration runs without Airflow as `python -m evaluation calibrate`.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import evaluation_airflow as glue
from airflow.sdk import Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from evaluation.contract.calibration import CalibrationError, CalibrationSpec
from evaluation.contract.options import CALIBRATE_OPTIONS, read_options

POOL = "llm_judge"
#: The form: the spec's fields (what `python -m evaluation calibrate` takes too) but the set's
#: folder, which is `golden_uri` + `golden_set` here, and the sizes of the job.
SPEC_OPTIONS = tuple(o for o in CALIBRATE_OPTIONS if o.name not in ("golden_uri", "max_record_chars", "chunk_size"))


@dag(
    dag_id="judge_calibration",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["llm-evaluation", "calibration"],
    doc_md=__doc__,
    params={
        "golden_set": Param(title="Golden set", description="The set's name: its folder under the golden root.",
                            type="string", minLength=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$"),
        "golden_uri": Param("", type="string", title="Golden root",
                            description="Where golden sets live (s3://bucket/prefix or a directory); empty: "
                                        "$EVALUATION_GOLDEN_URI."),
        **glue.form_params(SPEC_OPTIONS),
        "output_uri": Param("", type="string", title="Output URI",
                            description="Root of the landed tables; empty: $EVALUATION_OUTPUT_URI. The calibration "
                                        "lands under calibrations/."),
    },
    default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=1)},
)
def judge_calibration() -> None:
    @task(retries=1)
    def build_spec() -> dict[str, Any]:
        # Polars: DAG files must parse light
        from evaluation.calibration.run import calibration_id

        params = glue.check_conf(get_current_context())
        root = (params.get("golden_uri") or os.environ.get("EVALUATION_GOLDEN_URI", "")).rstrip("/")
        output_uri = params.get("output_uri") or os.environ.get("EVALUATION_OUTPUT_URI", "")
        if not root or not output_uri:
            raise AirflowFailException("set golden_uri and output_uri (or EVALUATION_GOLDEN_URI and "
                                       "EVALUATION_OUTPUT_URI)")
        values = read_options(CALIBRATE_OPTIONS, params)  # the form's, else the worker's EVALUATION_* variables
        glue.judge_connection_defaults(values)
        values["golden_uri"] = f"{root}/{params['golden_set']}"
        with glue.fail_without_retry(ValueError, prefix="invalid calibration: "):
            spec = CalibrationSpec.model_validate(values)
        return {"calibration_id": calibration_id(spec), "spec": spec.model_dump(mode="json"), "output_uri": output_uri}

    @task(pool=POOL, retries=3, retry_delay=dt.timedelta(minutes=1), retry_exponential_backoff=True)
    def judge(plan: dict[str, Any]) -> dict[str, Any]:
        # Polars: DAG files must parse light
        from evaluation.calibration.run import judge_golden_set

        out, golden = glue.open_stores(plan["output_uri"], plan["spec"]["golden_uri"])
        spec = CalibrationSpec.model_validate(plan["spec"])
        api_key, _ = glue.judge_credentials(spec.api_base)
        with glue.fail_without_retry(CalibrationError):
            return judge_golden_set(out, golden, spec, calibration=plan["calibration_id"], api_key=api_key)

    @task(retries=2)
    def calibrate(plan: dict[str, Any], judged: dict[str, Any]) -> dict[str, Any]:
        # Polars: DAG files must parse light
        from evaluation.calibration.run import calibrate as measure

        context = get_current_context()
        out, _ = glue.open_stores(plan["output_uri"], plan["spec"]["golden_uri"])
        spec = CalibrationSpec.model_validate(plan["spec"])
        with glue.fail_without_retry(CalibrationError):
            result = measure(out, spec, calibration=plan["calibration_id"],
                             calibrated_at=context["dag_run"].run_after)
        return {k: result[k] for k in ("calibration_id", "uri", "table_uri", "report_uri", "set", "judge_model",
                                       "records", "rejected", "calls_made", "calls_reused")}

    plan = build_spec()
    calibrate(plan, judge(plan))  # type: ignore[arg-type]  # XComArgs: TaskFlow passes their values when the task runs


judge_calibration()
