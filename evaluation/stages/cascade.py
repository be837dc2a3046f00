"""Cascade judging: a chunk judged level by level, cheapest judge model first.

A run's ``cascade`` names judge models tried before its own judge model, each with an uncertainty
band (given, or fitted by a calibration of the cascade: ``band_from``). Level 0 judges every
(record, judge) pair of the chunk that needs a call; a pair it scores ``ok`` outside its band is
decided there, any other pair (a score inside the band, both ends included, or a row that is not
``ok``) goes to the next level, and the judge model, the last level, decides what is left. The
judge stage runs the levels (:func:`evaluation.stages.judge.judge_cascade_chunk`, and
``judge_cascade_batch_step`` in batch mode, one level at a time), each exactly as a run with that
judge model judges a chunk (the same prompts, ledger and client), so a re-run finds every level's
replies in the ledger, pays nothing at any level and takes the same path through the levels. This
module holds what the stage, the plan and the landing share: which rows go on
(:func:`escalated`), a row's spending over its levels (:class:`PairSpending`) and the run's
summary (:func:`cascade_summary`).

A pair's landed row is the deciding level's row, with ``decided_by`` (that level's judge model)
and ``cascade_calls`` (the levels it was sent to), and its tokens, cost, latency and attempts
summed over those levels (``cached`` only when every level's reply came from the ledger);
``judge_calls`` keeps every level's call. Rows settled without a call (not applicable, empty
answer, sampled out) are the judge model's, with ``cascade_calls`` 0 and no ``decided_by``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from evaluation.calling.client import price_per_token
from evaluation.contract.config import RunConfig
from evaluation.judges.row import ParsedRow
from evaluation.stages.thresholds import Bands


def escalated(scored: pl.DataFrame, bands: Bands) -> pl.Series:
    """True for the rows of ``scored`` (a level's scored rows) that go to the next level: not ``ok``,
    no score, or a score inside its judge's band."""
    inside = pl.lit(False)
    for judge, (low, high) in bands.items():
        inside = inside | ((pl.col("judge") == judge) & pl.col("score").is_between(low, high, closed="both"))
    rule = (pl.col("judge_status") != "ok") | pl.col("score").is_null() | inside
    return scored.select(rule.fill_null(True).alias("escalated")).to_series()


@dataclass
class PairSpending:
    """A pair's spending summed over the levels it was sent to, and its calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 0
    calls: int = 0
    cached: bool = True  #: every level's reply came from the ledger

    def add(self, row: ParsedRow) -> bool:
        """Add one level's row; whether a call was made for it (a reply, or a call that failed)."""
        called = row.get("judged_at") is not None or row["judge_status"] == "call_error"
        self.input_tokens += row.get("input_tokens", 0)
        self.output_tokens += row.get("output_tokens", 0)
        self.cost_usd += row.get("cost_usd", 0.0)
        self.latency_ms += row.get("latency_ms", 0.0)
        self.attempts += row.get("attempts", 0)
        self.calls += 1 if called else 0
        self.cached = self.cached and bool(row.get("cached"))
        return called

    def onto(self, row: ParsedRow, decided_by: str | None) -> None:
        """Make ``row`` the pair's landed row: the sums, the calls and the model that decided."""
        row["input_tokens"], row["output_tokens"] = self.input_tokens, self.output_tokens
        row["cost_usd"], row["latency_ms"], row["attempts"] = self.cost_usd, round(self.latency_ms, 1), self.attempts
        row["cached"], row["cascade_calls"], row["decided_by"] = self.cached and self.calls > 0, self.calls, decided_by


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
        price_in, price_out = prices[model]
        levels.append({
            "judge_model": model, "decided": int(decided.get(model) or 0),
            "share_decided": round(int(decided.get(model) or 0) / pairs, 4) if pairs else None,
            "calls": int(row["calls"]), "cost_usd": round(float(row["cost_usd"] or 0.0), 6),
            "list_cost_usd": round(float((row["input_tokens"] or 0) * price_in + (row["output_tokens"] or 0) * price_out), 6),
        })
    first = (calls.filter(pl.col("judge_model") == models[0])
             .select(pl.col("input_tokens").sum(), pl.col("output_tokens").sum()).collect().row(0))
    price_in, price_out = prices[cfg.judge_model]
    alone = (first[0] or 0) * price_in + (first[1] or 0) * price_out
    total = sum(float(level["list_cost_usd"]) for level in levels)
    return {
        "levels": levels, "rows_called": pairs,
        "cost_usd": round(sum(float(level["cost_usd"]) for level in levels), 6),
        "list_cost_usd": round(total, 6), "judge_model_alone_list_cost_usd": round(alone, 6),
        "saved_share": round(1 - total / alone, 4) if alone else None,
    }
