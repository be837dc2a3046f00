"""Verdicts and statuses (CONTRACT §2.5), shared by every judge's table rules."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from evaluation.contract.config import JudgeName, Thresholds

#: Verdicts a judge's forcing rule turns into ``fail`` (and records in ``clamps_applied``).
PASSING = ("pass", "borderline")


def verdict(score: pl.Expr, thresholds: Thresholds) -> pl.Expr:
    """CONTRACT §2.5: ``pass`` if score ≥ the pass threshold, ``borderline`` if ≥ the borderline
    threshold (both inclusive), else ``fail``; null where the row has no score."""
    return (
        pl.when(score.is_null()).then(pl.lit(None, dtype=pl.String))
        .when(score >= thresholds.pass_).then(pl.lit("pass"))
        .when(score >= thresholds.borderline).then(pl.lit("borderline"))
        .otherwise(pl.lit("fail"))
    )


def verdict_by_judge(score: pl.Expr, thresholds: Thresholds, per_judge: Mapping[JudgeName, Thresholds]) -> pl.Expr:
    """:func:`verdict` at each row's judge's thresholds: ``per_judge[judge]`` where given (a run's
    calibrated thresholds), else ``thresholds``."""
    expr = verdict(score, thresholds)
    for judge, own in per_judge.items():
        if (own.pass_, own.borderline) != (thresholds.pass_, thresholds.borderline):
            expr = pl.when(pl.col("judge") == judge).then(verdict(score, own)).otherwise(expr)
    return expr


def scored_rows(judge: str, *statuses: str) -> pl.Expr:
    """Rows of ``judge`` whose status is one of ``statuses``, the ones that carry its score.
    CONTRACT §2.5: a ``call_error`` or ``skipped`` row has no score for any judge."""
    return (pl.col("judge") == judge) & pl.col("judge_status").is_in(statuses)
