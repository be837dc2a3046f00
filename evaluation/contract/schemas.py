"""Every table schema of the pipeline, in one place: the staged records, parsed judgements and
judge calls of a run; the landed ``evaluations``, ``judge_calls``, ``rejects``, ``daily_summary``
and ``runs``; the ledger of paid replies; what comparisons and calibrations land. docs/tables.md
documents them column by column."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from evaluation.contract.config import EVALUATION_COLUMNS, JUDGE_STATUSES, VERDICTS, InputRecord

RECORD_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "conversation_id": pl.String,
    "timestamp": pl.Datetime("us", "UTC"),
    "model": pl.String,
    "question": pl.String,
    "answer": pl.String,
    "contexts": pl.String,
    "reference": pl.String,
    "expected_outcome": pl.String,
    "rubrics": pl.String,
    "evaluation_goal": pl.String,
    "metadata": pl.String,
    "source_uri": pl.String,
    "line_no": pl.Int64,
}

_LIST = pl.List(pl.String)

#: What a call cost and when its reply came: columns of both the judged rows and the calls.
SPENT_SCHEMA: dict[str, Any] = {
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "attempts": pl.Int64,
    "cached": pl.Boolean,
    "judged_at": pl.Datetime("us", "UTC"),
}
PARSED_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "conversation_id": pl.String,
    "question_key": pl.String,
    "model": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "rules_version": pl.String,
    "judge_status": pl.String,
    "score": pl.Float64,
    "faithfulness": pl.Float64,
    "relevance": pl.Float64,
    "completeness": pl.Float64,
    "reasoning_quality": pl.Float64,
    "context_relevance": pl.Float64,
    "answer_relevance": pl.Float64,
    "semantic_similarity": pl.Float64,
    "evaluation_goal": pl.String,
    "hits": _LIST,
    "misses": _LIST,
    "reasoning": pl.String,
    "explanations": pl.String,
    "improvement_suggestions": _LIST,
    "citations": _LIST,
    "invalid_citations": _LIST,
    "uncited_claim_count": pl.Int64,
    "hallucination_detected": pl.Boolean,
    "reason": pl.String,
    "error": pl.String,
    **SPENT_SCHEMA,
    "decided_by": pl.String,
    "cascade_calls": pl.Int64,
    "reference_missing": pl.Boolean,
    "empty_answer": pl.Boolean,
    "rubric_mode": pl.Boolean,
    "required_unsatisfied": pl.Boolean,
    "rubric_weight_satisfied": pl.Float64,
    "rubric_weight_total": pl.Float64,
}

CALLS_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "record_id": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "request_hash": pl.String,
    "system_prompt": pl.String,
    "user_prompt": pl.String,
    "raw_response": pl.String,
    "error": pl.String,
    "error_class": pl.String,
    **SPENT_SCHEMA,
    "redactions": pl.Int64,
    "response_format": pl.String,
}

REJECT_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "source_uri": pl.String,
    "line_no": pl.Int64,
    "record_id": pl.String,
    "raw": pl.String,
    "reasons": _LIST,
}


def evaluation_schema() -> dict[str, Any]:
    """The landed ``evaluations`` table (without its ``dt`` partition column)."""
    schema = {**PARSED_SCHEMA, "run_id": pl.String, "verdict": pl.String, "clamps_applied": _LIST}
    return {c: schema[c] for c in EVALUATION_COLUMNS if c != "dt"}


def record_from_row(row: dict[str, Any]) -> InputRecord:
    """A staged record row as the judges' input model."""
    return InputRecord.model_validate(
        {
            **row,
            "contexts": json.loads(row["contexts"]) if row.get("contexts") else [],
            "rubrics": json.loads(row["rubrics"]) if row.get("rubrics") else None,
        }
    )


#: The measures ``daily_summary`` aggregates per (model, judge).
SUMMARY_METRICS = (
    "score",
    "faithfulness",
    "relevance",
    "completeness",
    "reasoning_quality",
    "context_relevance",
    "answer_relevance",
    "semantic_similarity",
)

SUMMARY_QUANTILES = (10, 50, 90)
LATENCY_QUANTILES = (50, 95)


def summary_schema() -> dict[str, Any]:
    """The columns of ``daily_summary`` without ``dt``, in order."""
    schema: dict[str, Any] = {"run_id": pl.String, "model": pl.String, "judge": pl.String, "rows": pl.Int64}
    schema.update({f"n_{s}": pl.Int64 for s in JUDGE_STATUSES})
    schema.update({f"n_{v}": pl.Int64 for v in VERDICTS})
    schema["pass_rate"] = pl.Float64
    for metric in SUMMARY_METRICS:
        schema.update({f"{metric}_mean": pl.Float64, f"{metric}_std": pl.Float64, f"{metric}_n": pl.Int64})
        schema.update({f"{metric}_p{q}": pl.Float64 for q in SUMMARY_QUANTILES})
    schema.update(input_tokens=pl.Int64, output_tokens=pl.Int64, cost_usd=pl.Float64, n_cached=pl.Int64)
    schema.update({f"latency_p{q}_ms": pl.Float64 for q in LATENCY_QUANTILES})
    schema.update(segment_key=pl.String, segment_value=pl.String)
    return schema


def runs_schema() -> dict[str, Any]:
    """The ``runs`` table (without ``dt``): one row per run, its status, counts, cost and timings."""
    return {
        "run_id": pl.String, "trigger": pl.String, "status": pl.String, "message": pl.String,
        "evidence_uri": pl.String, "config": pl.String, "pass_threshold": pl.Float64,
        "borderline_threshold": pl.Float64, "thresholds_from": pl.String, "input_records": pl.Int64,
        "valid_records": pl.Int64, "rejected_records": pl.Int64, "reject_reasons": pl.String, "rows": pl.Int64,
        **{f"n_{s}": pl.Int64 for s in JUDGE_STATUSES},
        "calls_made": pl.Int64, "calls_reused": pl.Int64, "input_tokens": pl.Int64, "output_tokens": pl.Int64,
        "cost_usd": pl.Float64, "estimated_prompt_tokens": pl.Int64, "estimated_cost_usd": pl.Float64,
        "timings": pl.String, "waited_s": pl.Float64, "versions": pl.String, "cascade": pl.String,
        "started_at": pl.Datetime("us", "UTC"), "finished_at": pl.Datetime("us", "UTC"),
    }


#: The content-addressed ledger of paid replies (``_ledger/``).
LEDGER_SCHEMA: dict[str, Any] = {
    "request_hash": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "raw_response": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "attempts": pl.Int64,
    "judged_at": pl.Datetime("us", "UTC"),
}

#: A comparison's ``metrics.parquet`` and ``verdicts.parquet``.
METRICS_SCHEMA: dict[str, Any] = {
    "comparison_id": pl.String,
    "start_date": pl.Date,
    "end_date": pl.Date,
    "judge": pl.String,
    "metric": pl.String,
    "model": pl.String,
    "baseline": pl.String,
    "is_baseline": pl.Boolean,
    "n": pl.Int64,
    "n_questions": pl.Int64,
    "mean": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "baseline_n": pl.Int64,
    "baseline_mean": pl.Float64,
    "test": pl.String,
    "delta_mean": pl.Float64,
    "delta_baseline_mean": pl.Float64,
    "delta": pl.Float64,
    "delta_ci_low": pl.Float64,
    "delta_ci_high": pl.Float64,
    "p_value": pl.Float64,
    "permutations": pl.Int64,
    "p_adjusted": pl.Float64,
    "p_adjust_method": pl.String,
    "n_tests": pl.Int64,
    "significant": pl.Boolean,
    "effect_size": pl.Float64,
    "effect_size_ci_low": pl.Float64,
    "effect_size_ci_high": pl.Float64,
    "n_pairs": pl.Int64,
    "wins": pl.Int64,
    "ties": pl.Int64,
    "losses": pl.Int64,
}

VERDICTS_SCHEMA: dict[str, Any] = {
    "comparison_id": pl.String,
    "start_date": pl.Date,
    "end_date": pl.Date,
    "judge": pl.String,
    "model": pl.String,
    "baseline": pl.String,
    "verdict": pl.String,
    "n": pl.Int64,
    "n_ok": pl.Int64,
    "share_pct": pl.Float64,
    "baseline_share_pct": pl.Float64,
    "shift_pp": pl.Float64,
}

#: The labels of a golden set.
LABELS_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "faithful": pl.Boolean,
    "rating": pl.Int64,
    "scores": pl.String,  # JSON object: metric -> human score in [0, 1]
    "verdict": pl.String,
    "source_label": pl.String,
    "good": pl.Boolean,  # the binary label the statistics use: faithful, else verdict != fail
    "split": pl.String,  # fit | holdout
}

#: One row per (set, judge, judge model, prompt version, metric): ``calibrations/``.
CALIBRATIONS_SCHEMA: dict[str, Any] = {
    "calibration_id": pl.String,
    "set_name": pl.String,
    "set_uri": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "rules_version": pl.String,
    "metric": pl.String,
    "n_records": pl.Int64,
    "n_ok": pl.Int64,
    "rate_ok": pl.Float64,
    "rate_parse_error": pl.Float64,
    "rate_judge_failed": pl.Float64,
    "rate_call_error": pl.Float64,
    "rate_skipped": pl.Float64,
    "n": pl.Int64,
    "n_good": pl.Int64,
    "n_bad": pl.Int64,
    "mean": pl.Float64,
    "auroc": pl.Float64,
    "auroc_ci_low": pl.Float64,
    "auroc_ci_high": pl.Float64,
    "spearman": pl.Float64,
    "spearman_label": pl.String,
    "pass_threshold": pl.Float64,
    "borderline_threshold": pl.Float64,
    "kappa": pl.Float64,
    "f1": pl.Float64,
    "precision": pl.Float64,
    "recall": pl.Float64,
    "tp": pl.Int64,
    "fp": pl.Int64,
    "fn": pl.Int64,
    "tn": pl.Int64,
    "confusion": pl.String,
    "n_expected": pl.Int64,
    "verdict_kappa": pl.Float64,
    "verdict_accuracy": pl.Float64,
    "verdict_confusion": pl.String,
    "best_borderline": pl.Float64,
    "best_pass": pl.Float64,
    "best_kappa": pl.Float64,
    "suggested_borderline": pl.Float64,
    "suggested_pass": pl.Float64,
    "suggested_by": pl.String,
    "n_fit": pl.Int64,
    "n_holdout": pl.Int64,
    "suggested_kappa_fit": pl.Float64,
    "suggested_kappa_holdout": pl.Float64,
    "current_kappa_holdout": pl.Float64,
    "seed": pl.Int64,
    "bootstrap": pl.Int64,
    "calibrated_at": pl.Datetime("us", "UTC"),
}

#: A calibration of a cascade: one row per (level, judge), ``calibrations/.../cascade.parquet``.
CASCADE_SCHEMA: dict[str, Any] = {
    "calibration_id": pl.String,
    "set_name": pl.String,
    "level": pl.Int64,
    "judge_model": pl.String,
    "judge": pl.String,
    "band_low": pl.Float64,
    "band_high": pl.Float64,
    "band_source": pl.String,
    "band_loss": pl.Float64,
    "n_fit": pl.Int64,
    "kappa_alone": pl.Float64,
    "kappa_alone_fit": pl.Float64,
    "kappa_alone_holdout": pl.Float64,
    "rows": pl.Int64,
    "reached": pl.Int64,
    "decided": pl.Int64,
    "share_decided": pl.Float64,
    "share_sent_on": pl.Float64,
    "cost_alone_usd": pl.Float64,
    "cost_usd": pl.Float64,
    "kappa_cascade": pl.Float64,
    "kappa_cascade_fit": pl.Float64,
    "kappa_cascade_holdout": pl.Float64,
    "band_confidence": pl.Float64,
    "disagreement_fit": pl.Float64,
    "disagreement_bound": pl.Float64,
    "disagreement_holdout": pl.Float64,
    "calibrated_at": pl.Datetime("us", "UTC"),
}
