"""
### review_queue

People in the loop, daily (`docs/people.md`): each run

1. **pull** — lands the Label Studio project's annotations completed since the last pull in
   `human_labels` (incremental and idempotent: a re-run lands nothing twice) and emits the
   `llm_evaluation.human_labels` Asset event when it landed rows;
2. **calibrate** — per judge model whose verdicts cover labelled records, calibrates its judges
   (this code's prompt versions) on the labels of the last `labels_days` days, without calling a
   judge again: lands `calibrations/calibration_id=cal-people-…/` (what `thresholds_from` takes)
   and emits the `llm_evaluation.calibrations` Asset event;
3. **queue** — picks the day's records for people (`dt` = the day before the run's logical date,
   or the `date` param): a uniform random slice with its inclusion probability plus the targeted
   strata (borderline verdicts, `rag`/`masis` disagreement, cascade escalations, flagged models),
   never a record queued or labelled before; lands `review_queue/dt=D/`;
4. **send** — sends the queued records not yet in the project as tasks (question, answer with its
   citations highlighted, contexts). Without the `label_studio` Connection the queue is only landed:
   export it with `python -m evaluation review export` and import the answers with `review import`.

Secrets come from the `label_studio` and `aws_default` Connections; only counts and URIs travel
through XCom.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import evaluation_airflow as glue
import evaluation_review as review_glue
from airflow.sdk import Param, dag, get_current_context, task

from evaluation.contract.options import options, read_options
from evaluation.contract.review import ReviewError, ReviewSpec

SPEC_OPTIONS = options(ReviewSpec)


def _spec(params: dict[str, Any]) -> ReviewSpec:
    values = read_options(SPEC_OPTIONS, {k: v for k, v in params.items() if k != "date"})
    with glue.fail_without_retry(ValueError, prefix="invalid review options: "):
        spec = ReviewSpec.model_validate(values)
        if not spec.output_uri:
            raise ValueError("output_uri is required (or EVALUATION_OUTPUT_URI)")
    return spec


@dag(
    dag_id="review_queue",
    schedule="0 6 * * *",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["llm-evaluation", "review"],
    doc_md=__doc__,
    params={"date": Param("", type="string", title="Day",
                          description="The records' day (YYYY-MM-DD); empty: the day before the logical date."),
            **glue.form_params(SPEC_OPTIONS)},
    default_args={"retries": 2, "retry_delay": dt.timedelta(minutes=2)},
)
def review_queue() -> None:
    @task(outlets=[review_glue.HUMAN_LABELS_ASSET])
    def pull() -> dict[str, Any]:
        from evaluation.stages.labelstudio import pull_labels  # Polars: DAG files must parse light

        context = get_current_context()
        spec = _spec(dict(glue.check_conf(context)))
        studio = review_glue.label_studio()
        if studio is None:
            return {"landed": 0, "label_studio": False}
        (store,) = glue.open_stores(spec.output_uri)
        with glue.fail_without_retry(ReviewError):
            landed = pull_labels(spec, store, studio)
        if landed.landed:
            context["outlet_events"][review_glue.HUMAN_LABELS_ASSET].extra = {"rows": landed.landed,
                                                                              "objects": len(landed.objects)}
        return {"landed": landed.landed, "already": landed.already, "label_studio": True}

    @task(outlets=[review_glue.CALIBRATIONS_ASSET])
    def calibrate() -> list[dict[str, Any]]:
        from evaluation.calibration.people import calibrate_all  # Polars: DAG files must parse light

        context = get_current_context()
        spec = _spec(dict(context["params"]))
        (store,) = glue.open_stores(spec.output_uri)
        found = calibrate_all(store, spec, glue.evaluation_day(context), context["dag_run"].run_after)
        landed = [f"{c.judge_model}={c.calibration_id}" for c in found if c.calibration_id]
        if landed:
            context["outlet_events"][review_glue.CALIBRATIONS_ASSET].extra = {"calibrations": ",".join(landed)}
        return [c.model_dump(mode="json") for c in found]

    @task
    def queue() -> dict[str, Any]:
        from evaluation.stages.review import queue_day  # Polars: DAG files must parse light

        context = get_current_context()
        spec = _spec(dict(context["params"]))
        day = glue.evaluation_day(context) - dt.timedelta(days=0 if context["params"].get("date") else 1)
        (store,) = glue.open_stores(spec.output_uri)
        with glue.fail_without_retry(ReviewError):
            return queue_day(spec, store, day, context["run_id"]).model_dump(mode="json")

    @task
    def send(queued: dict[str, Any]) -> dict[str, Any]:
        from evaluation.stages.labelstudio import send_queue  # Polars: DAG files must parse light

        spec = _spec(dict(get_current_context()["params"]))
        studio = review_glue.label_studio()
        if studio is None:
            return {"sent": 0, "label_studio": False}
        store, raw = glue.open_stores(spec.output_uri, spec.input_uri)
        with glue.fail_without_retry(ReviewError):
            return send_queue(spec, store, raw, studio, dt.date.fromisoformat(queued["day"])).model_dump()

    pulled, queued = pull(), queue()
    pulled >> [calibrate(), queued]
    send(queued)  # type: ignore[arg-type]  # XComArgs: TaskFlow passes their values when the task runs


review_queue()
