"""What a model comparison is asked (:class:`ComparisonSpec`) and the schemas of what it lands."""

from __future__ import annotations

from typing import Any

import polars as pl

from evaluation.contract import ComparisonError, ComparisonSpec

__all__ = ["METRICS_SCHEMA", "VERDICTS_SCHEMA", "ComparisonError", "ComparisonSpec"]

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
    "delta": pl.Float64,
    "delta_ci_low": pl.Float64,
    "delta_ci_high": pl.Float64,
    "p_value": pl.Float64,
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
