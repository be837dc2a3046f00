"""
### daily_evaluation

Every day, evaluates the LLM assistants' conversation logs of the day before:

0. **check_run** — fails the run before anything is paid for: an unknown conf key; a day without
   input objects when the run does not wait for it (saying what the input URI holds instead); a judge
   model that litellm cannot resolve or whose endpoint refuses a probe call of a few tokens
   (unknown model, missing or bad key: the message names the variable or connection to set), fails
   it without retry; an endpoint that refuses connections or does not answer within
   `probe_timeout_s` is retried. Each failure leaves the run's `runs` row with its cause.
1. **wait_for_day** — waits, deferred to the triggerer (no worker slot), until the day is complete:
   its `completion_marker` (e.g. `_SUCCESS`) exists under `{input_uri}/dt=YYYY-MM-DD/`, or, without
   one, no object has been added there for `quiet_period_s`; fails without retry at
   `wait_deadline_s`, or sooner, at `absent_deadline_s`, while the prefix holds no object at all
   (naming it and what to check). `runs.waited_s` records the wait. Up to `MAX_ACTIVE_RUNS` runs
   go at once, so a run waiting for its day holds neither a manual trigger nor the next day.
2. **ingest_validate** — reads `{input_uri}/dt=YYYY-MM-DD/` (`.jsonl`, `.jsonl.gz`, `.parquet`),
   validates every record with the Great Expectations suite, stages the rejects and the validation
   result; fails (without retry) when a table rule breaks, with the evidence under `_failed/`.
3. **plan** — samples (optional), splits the valid records into chunks, estimates tokens and cost.
   With `dry_run` on, it logs the day's size instead (calls, tokens, cost online and batch,
   judging time: what `python -m evaluation plan` prints), removes the run's work files and
   plans no chunk, so nothing is judged or landed (check_run sends no probe either).
4. **judge** — one mapped task per chunk, in the `llm_judge` pool: runs the judges (rag, masis,
   prompt) through litellm; retried on its own, reusing the replies already paid for. With `batch`
   on, a chunk's calls go to the provider as one batch and the task defers until it has ended.
5. **score_land** — clamps, scores and verdicts over the whole table; checks that the counts
   reconcile and that call errors stay under their ceiling, and only then replaces the day's
   `rejects`, `evaluations`, `judge_calls` and `daily_summary`, all at once (its own objects, then
   the day's commit record in one PUT: a task that dies between two uploads changes nothing
   readers see, and its retry lands the day whole). A run that breaks a rule keeps
   the day's tables as they were and lands its rows under `_failed/`; either way `runs` gets the
   run's row, with its status and cause. Once the day has landed, its ledger is compacted into a
   few objects (a failed compaction is logged, and the next landing compacts).
6. **report** — the day's self-contained quality report (HTML with charts) and `summary.json`
   under `{output_uri}/reports/dt=YYYY-MM-DD/`; `accept_baseline` (`MODEL=YYYY-MM-DD`) takes a
   model's days from that date on as its baseline, ending its regression.

On success `score_land` emits an Asset event per landed table (`llm_evaluation.evaluations`,
`...judge_calls`, `...rejects`, `...daily_summary`, `...runs`; `extra`: dt, run_id, uri), which
downstream DAGs can be scheduled on. A day on which a model regressed (the report's headline),
and a failed run, are sent by e-mail (`evaluation_smtp`) and to a Slack-compatible webhook
(`evaluation_webhook`), each only when its Connection exists; a steady day sends nothing. The
message links the report over HTTPS when `EVALUATION_REPORT_BASE_URL` is set.

Secrets come from the `aws_default` and `llm_judge` Connections. Params are the run's options
(the same as `python -m evaluation run`); `date` overrides the logical date's day.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import evaluation_airflow as glue
from airflow.sdk import CronDataIntervalTimetable, Param, dag, get_current_context, task
from evaluation_batch import JudgeChunkOperator
from evaluation_notifications import LANDED_ASSETS, RegressionNotifier, RunFailureNotifier
from evaluation_wait import WaitForDayOperator

from evaluation.contract.options import RUN_OPTIONS

POOL = "llm_judge"
#: Runs of the DAG at once: a run waiting for a late day must not hold a manual trigger, a re-run
#: or the next day's run (of two runs of one day the newer owns its landing, by the day's claim; the
#: judge calls of all of them share the llm_judge pool).
MAX_ACTIVE_RUNS = 4


def _score_land(waited_s: float | None) -> dict[str, Any]:
    """score_land's work: lands the day, then an Asset event per landed table, for downstream DAGs."""
    from evaluation import stages  # Polars: DAG files must parse light

    context = get_current_context()
    cfg = glue.run_config(context)
    with glue.fail_without_retry(stages.RunFailed):
        landed = stages.score_and_land(cfg, glue.stores(cfg), started_at=context["dag_run"].start_date,
                                       waited_s=waited_s).model_dump(mode="json")
    for asset in LANDED_ASSETS:
        table = asset.name.rsplit(".", 1)[1]
        context["outlet_events"][asset].extra = {"dt": cfg.date.isoformat(), "run_id": cfg.run_id,
                                                 "uri": f"{cfg.output_uri.rstrip('/')}/{table}/"}
    return landed


def _report() -> dict[str, str]:
    """report's work: writes the day's report, then sends a regression's notice."""
    from evaluation.report import AlertPolicy, write_daily_report  # Polars: DAG files must parse light
    from evaluation.storage import read_json, report_key

    context = get_current_context()
    cfg = glue.run_config(context)
    store = glue.stores(cfg).out
    written = write_daily_report(store, cfg.date, policy=AlertPolicy(accept_baseline=cfg.accept_baseline))
    RegressionNotifier(read_json(store, report_key(cfg.date, "summary.json")), written["html"])(context)
    return written


@dag(
    dag_id="daily_evaluation",
    schedule=CronDataIntervalTimetable("0 2 * * *", timezone="UTC"),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=MAX_ACTIVE_RUNS,
    tags=["llm-evaluation", "daily"],
    doc_md=__doc__,
    params={"date": Param("", type="string", title="Date override",
                          description="YYYY-MM-DD to evaluate instead of the logical date's day; empty for the schedule's day.",
                          pattern=r"^(\d{4}-\d{2}-\d{2})?$"),
            **glue.form_params(RUN_OPTIONS)},
    default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=2)},
    on_failure_callback=RunFailureNotifier(),
)
def daily_evaluation() -> None:
    @task(retries=2)
    def check_run() -> dict[str, Any]:
        from evaluation import stages  # Polars: DAG files must parse light
        from evaluation.stages.wait import waits

        cfg = glue.run_config(get_current_context())
        api_key, _ = glue.judge_credentials(cfg.api_base)
        with glue.fail_without_retry(stages.RunFailed):  # a day it will not wait for must be there already
            return stages.check_run(cfg, glue.stores(cfg), api_key=api_key, key_hint=glue.judge_key_hint(),
                                    input_ready=not waits(cfg)).model_dump(mode="json")

    @task(retries=2)
    def ingest_validate() -> dict[str, Any]:
        from evaluation import stages  # Polars: DAG files must parse light

        cfg = glue.run_config(get_current_context())
        with glue.fail_without_retry(stages.RunFailed):
            return stages.ingest_and_validate(cfg, glue.stores(cfg)).model_dump(mode="json")

    @task(retries=2)
    def plan(counts: dict[str, Any]) -> list[dict[str, Any]]:
        from evaluation import stages, storage  # Polars: DAG files must parse light

        cfg = glue.run_config(get_current_context())
        stores = glue.stores(cfg)
        chunks = stages.plan_chunks(cfg, stores)
        if cfg.dry_run:  # no chunk to judge: the mapped judge task and everything after it are skipped
            glue.log_day_size(stages.size_chunks(cfg, stores, chunks, pool_slots=glue.judge_pool_slots()))
            stores.out.delete_prefix(storage.work_prefix(cfg.date, cfg.run_id))
            return []
        return [c.model_dump(mode="json") for c in chunks]

    # One mapped task per chunk: judges online, or (batch on) submits the chunk's batch and defers
    # to the triggerer until it has ended, holding neither a worker slot nor a pool slot meanwhile.
    judge = JudgeChunkOperator.partial(task_id="judge", pool=POOL, retries=3, retry_delay=dt.timedelta(minutes=1),
                                       retry_exponential_backoff=True)

    @task(retries=2, outlets=list(LANDED_ASSETS))
    def score_land(judged: list[dict[str, Any]], waited: dict[str, Any] | None = None) -> dict[str, Any]:
        return _score_land((waited or {}).get("waited_s"))

    @task(retries=2)
    def report(landed: dict[str, Any]) -> dict[str, str]:
        return _report()

    # Deferred until the day is complete (marker or quiet period): no worker slot while it waits.
    wait = WaitForDayOperator(task_id="wait_for_day", retries=2)
    counts = ingest_validate()
    check_run() >> wait >> counts
    chunks = plan(counts)  # type: ignore[arg-type]  # XComArgs: TaskFlow passes their values when the task runs
    report(score_land(judge.expand(chunk=chunks).output, wait.output))  # type: ignore[arg-type]  # XComArgs: TaskFlow passes their values when the task runs


daily_evaluation()
