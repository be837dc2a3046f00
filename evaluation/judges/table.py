"""The table path every judge shares: a judge's post-processing as Polars expressions
(:class:`TableRules`), and :func:`apply_rules`, which scores a table of parsed rows of every judge
at once and records each rule that changed a value in ``clamps_applied`` (``"<rule>:<column>"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from evaluation.contract.config import JudgeName, Thresholds
from evaluation.judges.verdicts import PASSING, verdict_by_judge


@dataclass(frozen=True)
class TableRules:
    """One judge's post-processing over a table of parsed rows. Every condition is read on the
    judge's ``scored`` rows only; the other rows keep their values."""

    scored: pl.Expr
    """The rows this judge scores (CONTRACT §2.5: never a ``call_error`` or ``skipped`` row)."""
    values: dict[str, pl.Expr]
    """New values of metric columns, computed from the parsed values."""
    clamps: Sequence[tuple[pl.Expr, str]]
    """``(condition on the parsed values, label)``: where a rule changes a value, in label order."""
    score: pl.Expr
    """The score, computed from the columns as ``values`` left them."""
    fails: Sequence[tuple[pl.Expr, str | None]] = ()
    """``(condition on the scored values, label)``: the verdict is ``fail`` whatever the thresholds;
    a labelled rule records itself where the thresholds alone gave ``pass`` or ``borderline``."""


def outside_unit(expr: pl.Expr) -> pl.Expr:
    return (expr < 0.0) | (expr > 1.0)


def divide(expr: pl.Expr, constant: float) -> pl.Expr:
    """``expr / constant`` as a true IEEE division (a scalar divisor becomes an inexact product)."""
    return expr / (expr * 0.0 + constant)


def _first(cases: list[tuple[pl.Expr, pl.Expr]], otherwise: pl.Expr) -> pl.Expr:
    """The value of the first case whose condition holds, else ``otherwise``."""
    expr = otherwise
    for condition, value in reversed(cases):
        expr = pl.when(condition).then(value).otherwise(expr)
    return expr


def _rule_mask(rules: Sequence[tuple[pl.Expr, str | None]], offset: int = 0) -> pl.Expr:
    """Bit ``offset + i`` set where rule ``i`` holds (a null condition does not hold)."""
    bits = [c.fill_null(False).cast(pl.Int64) * (1 << (offset + i)) for i, (c, _) in enumerate(rules)]
    return pl.sum_horizontal(bits)


def _with_clamps(frame: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """``clamps_applied`` from the ``_mask`` bits, in rule order. A day holds a few dozen distinct
    masks: each becomes its list once and is gathered by position (a list built row by row out of
    twenty mostly-null label columns took 5 s per million rows)."""
    mask = frame.get_column("_mask")
    masks = mask.unique().to_list()
    lists = pl.Series("clamps_applied", [[n for i, n in enumerate(names) if m >> i & 1] for m in masks],
                      dtype=pl.List(pl.String))
    position = mask.replace_strict(masks, list(range(len(masks))), return_dtype=pl.UInt32)
    return frame.drop("_mask").with_columns(lists.gather(position))


def apply_rules(parsed: pl.DataFrame | pl.LazyFrame, judges: Sequence[TableRules],
                thresholds: Thresholds, per_judge: Mapping[JudgeName, Thresholds]) -> pl.DataFrame:
    """Every judge's rules over one table of parsed rows: new metric values, ``score``, ``verdict``
    (CONTRACT §2.5, on the score as landed, at ``per_judge[judge]`` where given, else ``thresholds``)
    and ``clamps_applied``. A row that no judge scores gets no score and no verdict."""
    clamps = [(judge.scored & condition, label) for judge in judges for condition, label in judge.clamps]
    columns = dict.fromkeys(column for judge in judges for column in judge.values)
    values = {
        column: _first([(j.scored, j.values[column]) for j in judges if column in j.values], pl.col(column))
        for column in columns
    }
    frame = parsed.lazy().with_columns(**values, _mask=_rule_mask(clamps))
    score = _first([(judge.scored, judge.score) for judge in judges], pl.lit(None, dtype=pl.Float64))
    frame = frame.with_columns(score=score)
    by_threshold = verdict_by_judge(pl.col("score"), thresholds, per_judge)
    fails = [(judge.scored & condition & by_threshold.is_in(PASSING), label)
             for judge in judges for condition, label in judge.fails]
    failed = pl.any_horizontal([condition for condition, _ in fails])
    labelled = [(condition, label) for condition, label in fails if label is not None]
    frame = frame.with_columns(
        verdict=pl.when(failed).then(pl.lit("fail")).otherwise(by_threshold),
        _mask=pl.col("_mask") + _rule_mask(labelled, offset=len(clamps)),
    )
    names = [label for _, label in clamps + labelled]
    return _with_clamps(frame.collect(), names)
