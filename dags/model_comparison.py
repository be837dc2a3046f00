"""
### model_comparison

Compares assistant models over a date range, on demand (trigger it with the form):

1. **build_spec** — checks the form (dates, models, baseline, judges, sample, seed) and names the
   comparison (a hash of its spec: triggering the same form again replaces the same comparison).
2. **needs_judging** — with an empty *judge model* the landed scores are compared and the next
   step is skipped.
3. **rejudge** — in the `llm_judge` pool: reads the range's raw logs again, validates them, takes a
   seeded sample of each model's records and judges them with the chosen judge model; retried on
   its own, reusing the replies already paid for.
4. **compare** — per judge and metric: each model's mean with a 95% bootstrap interval, its
   difference from the baseline with a 95% interval and a p-value (paired on the question when
   the models answered the same questions), win/tie/loss counts and the verdict mix; lands
   `comparisons/comparison_id=<id>/` (`metrics.parquet`, `verdicts.parquet`, `spec.json`,
   `report.html`).

Only URIs and counts travel through XCom. Secrets come from the `aws_default` and `llm_judge`
Connections. The same comparison runs without Airflow as `python -m evaluation compare`.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import evaluation_airflow as glue
from airflow.sdk import Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.options import COMPARE_OPTIONS, RUN_OPTIONS, read_options

POOL = "llm_judge"
#: Where the tables live: the run options of that name.
_URIS = {o.name: o for o in RUN_OPTIONS if o.name in ("input_uri", "output_uri")}


def _params() -> dict[str, Param]:
    """The form: the flags of `python -m evaluation compare` (ComparisonSpec's fields but the
    re-judging thresholds), then where the tables live."""
    params = glue.form_params(COMPARE_OPTIONS)
    for name, purpose in (("input_uri", "needed to re-judge"), ("output_uri", "the comparison lands under comparisons/")):
        option = _URIS[name]
        params[name] = Param("", type="string", title=option.title, description=f"{option.help} ({purpose})")
    return params


@dag(
    dag_id="model_comparison",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["llm-evaluation", "comparison"],
    doc_md=__doc__,
    params=_params(),
    default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=1)},
)
def model_comparison() -> None:
    @task(retries=1)
    def build_spec() -> dict[str, Any]:
        params = glue.check_conf(get_current_context())
        values = read_options(COMPARE_OPTIONS, params)  # empty options from the worker's EVALUATION_* variables
        if values.get("judge_model"):  # re-judging: the llm_judge connection's host and limits, as a run's
            glue.judge_connection_defaults(values)
        with glue.fail_without_retry(ValueError, prefix="invalid comparison: "):
            spec = ComparisonSpec.model_validate(values)
        # Empty URIs come from the worker's environment, as the daily DAG's do.
        uris = {name: params.get(name) or os.environ.get(option.env or "", "") for name, option in _URIS.items()}
        if not uris["output_uri"]:
            raise AirflowFailException("set output_uri (or EVALUATION_OUTPUT_URI)")
        if spec.rejudges and not uris["input_uri"]:
            raise AirflowFailException("re-judging reads the raw logs: set input_uri")
        return {"comparison_id": spec.default_id(), "spec": spec.model_dump(mode="json"), **uris}

    @task.short_circuit(retries=1, ignore_downstream_trigger_rules=False)
    def needs_judging(plan: dict[str, Any]) -> bool:
        return plan["spec"]["judge_model"] is not None

    @task(pool=POOL, retries=3, retry_delay=dt.timedelta(minutes=1), retry_exponential_backoff=True)
    def rejudge(plan: dict[str, Any]) -> dict[str, Any]:
        # Polars: DAG files must parse light
        from evaluation import compare

        out, raw = glue.open_stores(plan["output_uri"], plan["input_uri"])
        api_key, _ = glue.judge_credentials()
        spec = compare.ComparisonSpec.model_validate(plan["spec"])
        with glue.fail_without_retry(compare.ComparisonError):
            return compare.judge_sample(out, spec, comparison_id=plan["comparison_id"], raw_store=raw, api_key=api_key)

    @task(retries=2, trigger_rule="none_failed")
    def compare(plan: dict[str, Any]) -> dict[str, Any]:
        # Polars: DAG files must parse light
        from evaluation import compare as comparison

        out, _ = glue.open_stores(plan["output_uri"], plan["input_uri"])
        spec = comparison.ComparisonSpec.model_validate(plan["spec"])
        # no raw store: judging happens in `rejudge`, inside the pool, never here
        with glue.fail_without_retry(comparison.ComparisonError):
            result = comparison.run_comparison(out, spec, comparison_id=plan["comparison_id"])
        return {
            **{k: result[k] for k in ("comparison_id", "source", "uri", "metrics_uri", "verdicts_uri", "spec_uri",
                                      "report_uri", "records_per_model", "rows")},
            "significant_deltas": sum(1 for d in result["deltas"] if d["significant"]),
        }

    plan = build_spec()
    needs_judging(plan) >> rejudge(plan) >> compare(plan)  # type: ignore[arg-type]  # XComArgs: TaskFlow passes their values when the task runs


model_comparison()
