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
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from evaluation.contract import JUDGES
from evaluation.options import OPTIONS

POOL = "llm_judge"
_DEFAULTS = {o.name: o.default for o in OPTIONS}
#: Params that are fields of evaluation.compare.ComparisonSpec.
SPEC_PARAMS = ("start_date", "end_date", "models", "baseline", "judges", "sample_per_model", "seed", "judge_model",
               "api_base", "concurrency", "bootstrap")


def _params() -> dict[str, Param]:
    return {
        "start_date": Param(type="string", format="date", title="From", description="First day (dt) of the range."),
        "end_date": Param(type="string", format="date", title="To", description="Last day (dt) of the range, inclusive."),
        "models": Param(type="array", items={"type": "string", "minLength": 1}, minItems=2, uniqueItems=True,
                        title="Models", description="The models (the `model` column) to compare, at least two."),
        "baseline": Param("", type="string", title="Baseline",
                          description="The model the others are compared to; empty for the first model."),
        "judges": Param(list(JUDGES), type="array", items={"type": "string", "enum": list(JUDGES)}, minItems=1,
                        uniqueItems=True, title="Judges", description="Judges to compare: rag, masis, prompt."),
        "sample_per_model": Param(None, type=["null", "integer"], minimum=1, title="Sample per model",
                                  description="At most this many records per model (a seeded sample); empty for all."),
        "seed": Param(0, type="integer", minimum=0, title="Seed",
                      description="Seeds the sample, the bootstrap and the permutations: same seed, same tables."),
        "judge_model": Param("", type="string", title="Judge model",
                             description="Re-judge the sample with this litellm model; empty compares the landed scores."),
        "api_base": Param("", type="string", title="API base",
                          description="Base URL of an OpenAI-compatible judge server; empty for the provider's own."),
        "concurrency": Param(8, type="integer", minimum=1, maximum=1024, title="Concurrency",
                             description="Judge calls in flight when re-judging."),
        "bootstrap": Param(2000, type="integer", minimum=100, maximum=100_000, title="Bootstrap resamples",
                           description="Resamples of the bootstrap intervals and permutation tests."),
        "input_uri": Param(_DEFAULTS["input_uri"], type="string", title="Input URI",
                           description="Root of the raw logs (needed to re-judge): s3://bucket/prefix or a directory."),
        "output_uri": Param(_DEFAULTS["output_uri"], type="string", minLength=1, title="Output URI",
                            description="Root of the landed tables; the comparison lands under comparisons/."),
    }


def _stores(plan: dict[str, Any]) -> tuple[Any, Any]:
    """The output and raw-input stores of a comparison, S3 through the Airflow connection."""
    import evaluation_airflow as glue

    from evaluation import storage

    uris = (plan["output_uri"], plan["input_uri"])
    client = glue.s3_client() if any(u.startswith("s3://") for u in uris if u) else None
    out = storage.open_store(plan["output_uri"], client)
    raw = storage.open_store(plan["input_uri"], client) if plan["input_uri"] else None
    return out, raw


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
        import evaluation_airflow as glue

        from evaluation.compare import ComparisonSpec

        context = get_current_context()
        glue.check_conf(context)
        params = context["params"]
        values = {name: params.get(name) for name in SPEC_PARAMS}
        if values["judge_model"] and not values["api_base"]:
            values["api_base"] = glue.judge_credentials()[1]
        try:
            spec = ComparisonSpec.model_validate(values)
        except ValueError as exc:
            raise glue.fail_without_retry(ValueError(f"invalid comparison: {exc}")) from exc
        if spec.judge_model is not None and not params.get("input_uri"):
            raise glue.fail_without_retry(ValueError("re-judging reads the raw logs: set input_uri"))
        return {
            "comparison_id": spec.default_id(),
            "spec": spec.model_dump(mode="json"),
            "input_uri": params.get("input_uri") or "",
            "output_uri": params["output_uri"],
        }

    @task.short_circuit(retries=1, ignore_downstream_trigger_rules=False)
    def needs_judging(plan: dict[str, Any]) -> bool:
        return plan["spec"]["judge_model"] is not None

    @task(pool=POOL, retries=3, retry_delay=dt.timedelta(minutes=1), retry_exponential_backoff=True)
    def rejudge(plan: dict[str, Any]) -> dict[str, Any]:
        import evaluation_airflow as glue

        from evaluation import compare

        out, raw = _stores(plan)
        api_key, _ = glue.judge_credentials()
        spec = compare.ComparisonSpec.model_validate(plan["spec"])
        try:
            return compare.judge_sample(out, spec, comparison_id=plan["comparison_id"], raw_store=raw, api_key=api_key)
        except compare.ComparisonError as exc:
            raise glue.fail_without_retry(exc) from exc

    @task(retries=2, trigger_rule="none_failed")
    def compare(plan: dict[str, Any]) -> dict[str, Any]:
        import evaluation_airflow as glue

        from evaluation import compare as comparison

        out, _ = _stores(plan)
        spec = comparison.ComparisonSpec.model_validate(plan["spec"])
        try:  # no raw store: judging happens in `rejudge`, inside the pool, never here
            result = comparison.run_comparison(out, spec, comparison_id=plan["comparison_id"])
        except comparison.ComparisonError as exc:
            raise glue.fail_without_retry(exc) from exc
        return {
            **{k: result[k] for k in ("comparison_id", "source", "uri", "metrics_uri", "verdicts_uri", "spec_uri",
                                      "report_uri", "records_per_model", "rows")},
            "significant_deltas": sum(1 for d in result["deltas"] if d["significant"]),
        }

    plan = build_spec()
    needs_judging(plan) >> rejudge(plan) >> compare(plan)


model_comparison()
