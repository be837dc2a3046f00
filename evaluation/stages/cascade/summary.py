"""What a cascade's run did, level by level: the ``runs`` row's ``cascade`` and the report's."""

from __future__ import annotations

from typing import Any

import polars as pl

from evaluation.calling.client import price_per_token
from evaluation.calling.cost import tokens_cost
from evaluation.contract.config import RunConfig


def cascade_summary(cfg: RunConfig, evaluations: pl.LazyFrame, calls: pl.LazyFrame) -> dict[str, Any]:
    """What a cascade run's judging did, level by level (the ``runs`` row's ``cascade`` and the
    report's): the rows each level decided and their share of the rows that needed a call, its calls,
    what they cost (``cost_usd``, as paid: a reply reused from the ledger costs nothing) and what they
    are worth at litellm's online prices for their tokens (``list_cost_usd``, the same on a re-run);
    then the same at the judge model's prices for every row that needed a call, one call each (its
    tokens as its first level's call reported): the cost of the judge model alone."""
    models = [level.judge_model for level in cfg.cascade] + [cfg.judge_model]
    decided = dict(evaluations.filter(pl.col("decided_by").is_not_null()).group_by("decided_by").len()
                   .collect().iter_rows())
    pairs = int(evaluations.filter(pl.col("cascade_calls") > 0).select(pl.len()).collect().item())
    prices = {model: price_per_token(model) for model in models}
    per_model = calls.group_by("judge_model").agg(
        pl.len().alias("calls"), pl.col("cost_usd").sum(), pl.col("input_tokens").sum(), pl.col("output_tokens").sum(),
    ).collect()
    found = {row["judge_model"]: row for row in per_model.iter_rows(named=True)}
    levels: list[dict[str, Any]] = []
    for model in models:
        row = found.get(model) or {"calls": 0, "cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0}
        levels.append({
            "judge_model": model, "decided": int(decided.get(model) or 0),
            "share_decided": round(int(decided.get(model) or 0) / pairs, 4) if pairs else None,
            "calls": int(row["calls"]), "cost_usd": round(float(row["cost_usd"] or 0.0), 6),
            "list_cost_usd": round(tokens_cost(row["input_tokens"] or 0, row["output_tokens"] or 0, prices[model]), 6),
        })
    first = found.get(models[0]) or {"input_tokens": 0, "output_tokens": 0}
    alone = tokens_cost(first["input_tokens"] or 0, first["output_tokens"] or 0, prices[cfg.judge_model])
    total = sum(float(level["list_cost_usd"]) for level in levels)
    return {
        "levels": levels, "rows_called": pairs,
        "cost_usd": round(sum(float(level["cost_usd"]) for level in levels), 6),
        "list_cost_usd": round(total, 6), "judge_model_alone_list_cost_usd": round(alone, 6),
        "saved_share": round(1 - total / alone, 4) if alone else None,
    }
