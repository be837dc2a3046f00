"""The report's score distributions: each model's count of ok values per bin, per judge and metric."""

from __future__ import annotations

import polars as pl

from evaluation.contract.config import JUDGES
from evaluation.contract.schemas import SUMMARY_METRICS as METRICS
from evaluation.pages import charts
from evaluation.report.summary import Distribution

__all__ = ["HISTOGRAM_BINS", "distributions", "judge_order"]

#: Bins of each distribution over [0, 1].
HISTOGRAM_BINS = 10


def judge_order(judge: str) -> tuple[int, str]:
    """The judges in the contract's order (rag, masis, prompt), any other after them."""
    order: list[str] = list(JUDGES)
    return (order.index(judge) if judge in order else len(order), judge)


def distributions(evaluations: pl.LazyFrame, models: list[str]) -> list[Distribution]:
    """Per (judge, metric): each model's count of ok values per bin (one streaming aggregation)."""
    metrics = [m for m in METRICS if m in evaluations.collect_schema()]
    counts = (
        evaluations.filter(pl.col("judge_status") == "ok")
        .select("judge", "model", *metrics)
        .unpivot(index=["judge", "model"], on=metrics, variable_name="metric", value_name="value")
        .drop_nulls("value")
        .group_by("judge", "metric", "model", charts.bin_expr(pl.col("value"), bins=HISTOGRAM_BINS).alias("bin"))
        .len()
        .collect(engine="streaming")
    )
    per_bin = {(j, m, model, b): int(n) for j, m, model, b, n in counts.iter_rows()}
    out = []
    for judge in sorted(set(counts["judge"].to_list()), key=judge_order):
        for metric in metrics:
            per_model = {model: [per_bin.get((judge, metric, model, b), 0) for b in range(HISTOGRAM_BINS)] for model in models}
            per_model = {model: bins for model, bins in per_model.items() if sum(bins)}
            if per_model:
                out.append(Distribution(judge=judge, metric=metric, edges=[i / HISTOGRAM_BINS for i in range(HISTOGRAM_BINS + 1)],
                                        counts=per_model, n={model: sum(bins) for model, bins in per_model.items()}))
    return out
