"""The schemas of what a calibration lands: the labels of a golden set and the ``calibrations`` table."""

from __future__ import annotations

from typing import Any

import polars as pl

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
