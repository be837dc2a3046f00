"""The stages of a day's evaluation, shared by the Airflow DAGs and the command line.

    check_run -> ingest_and_validate -> plan_chunks -> judge_chunk (one per chunk) -> score_and_land

Each stage reads what the previous one staged under ``_work/dt=.../run=.../`` and returns a
small typed result (what the DAG passes through XCom, as JSON). Every stage is idempotent for its
run: a retried stage rewrites the same keys. Run-level problems raise :class:`RunFailed` naming
the run, the day and the cause; per-record problems are rows with a status.

Nothing replaces the day's landed tables before every run-level rule has passed: ingest stages
the rejects and the validation result with the run, and :func:`score_and_land` lands every table
of the day only after the counts reconcile and the call-error ceiling holds. A run that breaks a
rule lands its evidence under ``_failed/`` (see :func:`~evaluation.storage.failed_prefix`) and its
``runs`` row with status ``failed`` and the cause; the day's tables and report stay as they were.
"""

from __future__ import annotations

from evaluation._lazy import lazy_exports

# Loaded on first use: a light module of the package (the table schemas) pulls in no stage.
_EXPORTS = {
    "CheckResult": "evaluation.stages._run",
    "ChunkPlan": "evaluation.stages._run",
    "ChunkResult": "evaluation.stages._run",
    "CostEstimate": "evaluation.stages._run",
    "DayResult": "evaluation.stages._run",
    "IngestCounts": "evaluation.stages._run",
    "JudgeUnreachable": "evaluation.stages._run",
    "JudgeUnusable": "evaluation.stages._run",
    "Manifest": "evaluation.stages._run",
    "PlanRecord": "evaluation.stages._run",
    "RunFailed": "evaluation.stages._run",
    "StaleRun": "evaluation.stages._run",
    "Stores": "evaluation.stages._run",
    "fail_run": "evaluation.stages._run",
    "read_manifest": "evaluation.stages._run",
    "staged_key": "evaluation.stages._run",
    "where": "evaluation.stages._run",
    "write_record": "evaluation.stages._run",
    "check_run": "evaluation.stages.check",
    "judge_client": "evaluation.stages.check",
    "probe_judge": "evaluation.stages.check",
    "run_day": "evaluation.stages.day",
    "ingest_and_validate": "evaluation.stages.ingest",
    "raw_objects": "evaluation.stages.ingest",
    "validated_batches": "evaluation.stages.ingest",
    "judge_chunk": "evaluation.stages.judge",
    "score_and_land": "evaluation.stages.land",
    "content_keys": "evaluation.stages.plan",
    "in_key_order": "evaluation.stages.plan",
    "key_range": "evaluation.stages.plan",
    "plan_chunks": "evaluation.stages.plan",
    "sample_mask": "evaluation.stages.plan",
    "stage_chunks": "evaluation.stages.plan",
    "DaySize": "evaluation.stages.sizing",
    "plan_day": "evaluation.stages.sizing",
    "size_chunks": "evaluation.stages.sizing",
    "size_text": "evaluation.stages.sizing",
    "CALLS_SCHEMA": "evaluation.stages.schemas",
    "PARSED_SCHEMA": "evaluation.stages.schemas",
    "RECORD_SCHEMA": "evaluation.stages.schemas",
    "REJECT_SCHEMA": "evaluation.stages.schemas",
    "record_from_row": "evaluation.stages.schemas",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
