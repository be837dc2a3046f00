"""The ``daily_summary`` table: per (dt, model, judge) counts, quality aggregates and cost.

Quality aggregates (means, quantiles, verdict counts, pass rate) use ``ok`` rows only; every other
status is counted, never averaged in (CONTRACT §2.5). Quantiles interpolate linearly, as
DuckDB's ``quantile_cont`` and Athena's ``approx_percentile`` on small groups do.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from evaluation.contract import JUDGE_STATUSES, VERDICTS

METRICS = (
    "score",
    "faithfulness",
    "relevance",
    "completeness",
    "reasoning_quality",
    "context_relevance",
    "answer_relevance",
    "semantic_similarity",
)


def summary_aggregations() -> list[pl.Expr]:
    """The aggregations of one ``daily_summary`` group."""
    ok = pl.col("judge_status") == "ok"
    exprs: list[pl.Expr] = [pl.len().alias("rows")]
    exprs += [(pl.col("judge_status") == s).sum().alias(f"n_{s}") for s in JUDGE_STATUSES]
    exprs += [(ok & (pl.col("verdict") == v)).sum().alias(f"n_{v}") for v in VERDICTS]
    exprs.append(
        pl.when(ok.sum() > 0)
        .then((ok & (pl.col("verdict") == "pass")).sum() / ok.sum())
        .otherwise(None)
        .alias("pass_rate")
    )
    for metric in METRICS:
        value = pl.col(metric).filter(ok)
        exprs.append(value.mean().alias(f"{metric}_mean"))
        exprs.append(value.std().alias(f"{metric}_std"))
        exprs.append(value.count().alias(f"{metric}_n"))
        for q in (10, 50, 90):
            exprs.append(value.quantile(q / 100, interpolation="linear").alias(f"{metric}_p{q}"))
    exprs += [
        pl.col("input_tokens").sum().alias("input_tokens"),
        pl.col("output_tokens").sum().alias("output_tokens"),
        pl.col("cost_usd").sum().alias("cost_usd"),
        pl.col("cached").sum().alias("n_cached"),
        pl.col("latency_ms").filter(pl.col("attempts") > 0).quantile(0.5, interpolation="linear").alias("latency_p50_ms"),
        pl.col("latency_ms").filter(pl.col("attempts") > 0).quantile(0.95, interpolation="linear").alias("latency_p95_ms"),
    ]
    return exprs


def build_daily_summary(evaluations: pl.DataFrame | pl.LazyFrame, day: dt.date, run_id: str) -> pl.DataFrame:
    """One row per (model, judge) of the day's ``evaluations`` (without the ``dt`` column)."""
    frame = evaluations.lazy()
    summary = (
        frame.group_by("model", "judge")
        .agg(summary_aggregations())
        .with_columns(run_id=pl.lit(run_id))
        .sort("model", "judge")
        .collect()
    )
    counts = [c for c, t in summary.schema.items() if t in (pl.UInt32, pl.UInt64, pl.Int32)]
    summary = summary.with_columns(pl.col(counts).cast(pl.Int64))  # 64-bit counts for every reader
    return summary.select("run_id", "model", "judge", pl.exclude("run_id", "model", "judge"))
