"""The stages of a day's evaluation, shared by the Airflow DAGs and the command line.

    check_run -> ingest_and_validate -> plan_chunks -> judge_chunk (one per chunk) -> score_and_land

(:func:`evaluation.cli.day.run_day` runs them all in one process, then the report; the tables'
schemas are :mod:`evaluation.contract.schemas`.)

Each stage reads what the previous one staged under ``_work/dt=.../run=.../`` and returns a
small typed result (what the DAG passes through XCom, as JSON). Every stage is idempotent for its
run: a retried stage rewrites the same keys. Run-level problems raise :class:`RunFailed` naming
the run, the day and the cause; per-record problems are rows with a status.

Nothing replaces the day's landed tables before every run-level rule has passed
(:func:`score_and_land`); a run that breaks a rule lands its evidence under ``_failed/`` and its
``runs`` row with status ``failed`` and the cause (:func:`fail_run`).
"""

from evaluation.calling.client import judge_client
from evaluation.stages._run import (
    CostEstimate,
    DayResult,
    JudgeUnreachable,
    JudgeUnusable,
    PlanRecord,
    RunFailed,
    StaleRun,
    Stores,
    fail_run,
    read_manifest,
    staged_key,
    where,
    write_record,
)
from evaluation.stages.check import check_run, probe_judge
from evaluation.stages.ingest import ingest_and_validate, raw_objects, validated_batches
from evaluation.stages.judge import judge_chunk
from evaluation.stages.land import score_and_land
from evaluation.stages.plan import content_keys, in_key_order, key_range, plan_chunks, sample_mask, stage_chunks
from evaluation.stages.sizing import DaySize, plan_day, size_chunks, size_text

__all__ = [
    "CostEstimate", "DayResult", "DaySize", "JudgeUnreachable", "JudgeUnusable", "PlanRecord", "RunFailed", "StaleRun",
    "Stores", "check_run", "content_keys", "fail_run", "in_key_order", "ingest_and_validate", "judge_chunk", "judge_client", "key_range",
    "plan_chunks", "plan_day", "probe_judge", "raw_objects", "read_manifest", "sample_mask", "score_and_land",
    "size_chunks", "size_text", "stage_chunks", "staged_key", "validated_batches", "where", "write_record",
]
