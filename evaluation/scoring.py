"""Deterministic post-processing of parsed rows: clamps, scores and verdicts (CONTRACT §2.2–2.5).

Two implementations of the same rules, tested against each other digit for digit:

* :func:`score_row` works on one parsed row (a dict from :mod:`evaluation.judges`), for unit tests
  and for reading the rules;
* :func:`score_table` works on a whole Polars table of parsed rows, as expressions, and is what
  the pipeline runs.

Every rule that changes a value records itself in ``clamps_applied`` as ``"<rule>:<column>"``:

==============================  ===========================================================
``clamp_0_1:<metric>``           a value outside [0, 1] was clamped (rag metrics, masis
                                 dimensions after scaling, the prompt score)
``scale_100:<dimension>``        a masis dimension above 1 was divided by 100
``invalid_citation_cap_0.4:faithfulness``  masis: hallucination or an invalid citation
``uncited_ge_10_cap_0.3:faithfulness``     masis: 10 or more uncited sentences
``uncited_ge_5_cap_0.5:faithfulness``      masis: 5 to 9 uncited sentences
``no_reference_null:semantic_similarity``  rag: the reference is missing
``critical_hallucination_fail:verdict``    rag: faithfulness 0.0 forces ``fail``
``required_rubric_fail:verdict``           prompt: an unsatisfied required rubric forces ``fail``
==============================  ===========================================================

Rounding is Python's ``round`` in both implementations (see :mod:`evaluation._rounding`).
"""

from __future__ import annotations

import copy
from typing import Any

import polars as pl

from evaluation._rounding import round_like_python
from evaluation.contract import Thresholds
from evaluation.judges import MASIS_DIMENSIONS, RAG_METRICS

#: rag's weights for the overall score, in the order the weighted mean adds them up.
RAG_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("faithfulness", 0.4),
    ("answer_relevance", 0.3),
    ("context_relevance", 0.15),
    ("semantic_similarity", 0.15),
)
#: masis's weights for the overall score, in the seed's order of addition.
MASIS_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("faithfulness", 0.35),
    ("relevance", 0.25),
    ("completeness", 0.25),
    ("reasoning_quality", 0.15),
)

# --------------------------------------------------------------------------------------------
# One row


def verdict_for(score: float | None, thresholds: Thresholds) -> str | None:
    """``pass`` / ``borderline`` / ``fail`` by inclusive thresholds; None without a score."""
    if score is None:
        return None
    if score >= thresholds.pass_:
        return "pass"
    if score >= thresholds.borderline:
        return "borderline"
    return "fail"


def _clamp_unit(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def _score_rag(row: dict[str, Any], clamps: list[str]) -> None:
    for metric in RAG_METRICS:
        value = row[metric]
        if value is None:
            continue
        if not 0.0 <= value <= 1.0:
            clamps.append(f"clamp_0_1:{metric}")
            value = _clamp_unit(value)
        row[metric] = round(value, 2)
    if row["reference_missing"] and row["semantic_similarity"] is not None:
        clamps.append("no_reference_null:semantic_similarity")
        row["semantic_similarity"] = None
    numerator = denominator = 0.0
    for metric, weight in RAG_WEIGHTS:
        if row[metric] is not None:
            numerator += row[metric] * weight
            denominator += weight
    row["score"] = round(numerator / denominator, 3) if denominator > 0 else None


def _score_masis(row: dict[str, Any], clamps: list[str]) -> None:
    for dimension in MASIS_DIMENSIONS:
        value = row[dimension]
        if value > 1:
            clamps.append(f"scale_100:{dimension}")
            value = value / 100.0
        if not 0.0 <= value <= 1.0:
            clamps.append(f"clamp_0_1:{dimension}")
            value = _clamp_unit(value)
        row[dimension] = value
    faithfulness = row["faithfulness"]
    if (row["hallucination_detected"] or row["invalid_citations"]) and faithfulness > 0.4:
        clamps.append("invalid_citation_cap_0.4:faithfulness")
        faithfulness = 0.4
    uncited = row["uncited_claim_count"]
    if uncited >= 10 and faithfulness > 0.3:
        clamps.append("uncited_ge_10_cap_0.3:faithfulness")
        faithfulness = 0.3
    elif 5 <= uncited < 10 and faithfulness > 0.5:
        clamps.append("uncited_ge_5_cap_0.5:faithfulness")
        faithfulness = 0.5
    row["faithfulness"] = faithfulness
    total = row["faithfulness"] * 0.35
    for dimension, weight in MASIS_WEIGHTS[1:]:
        total = total + row[dimension] * weight
    row["score"] = round(total, 3)


def _score_prompt(row: dict[str, Any], clamps: list[str]) -> None:
    score = row["score"]
    if score is not None and not 0.0 <= score <= 1.0:
        clamps.append("clamp_0_1:score")
        row["score"] = _clamp_unit(score)


def score_row(parsed: dict[str, Any], thresholds: Thresholds | None = None) -> dict[str, Any]:
    """Apply CONTRACT §2.2–2.5 to one parsed row; returns a new row with score and verdict."""
    thresholds = thresholds or Thresholds()
    row = copy.deepcopy(parsed)
    clamps: list[str] = []
    judge, status = row["judge"], row["judge_status"]
    scorable = status == "ok" or (judge == "prompt" and status == "parse_error" and row["score"] is not None)
    if not scorable:
        row["score"] = None
    elif judge == "rag":
        _score_rag(row, clamps)
    elif judge == "masis":
        _score_masis(row, clamps)
    else:
        _score_prompt(row, clamps)
    verdict = verdict_for(row["score"], thresholds) if scorable else None
    if judge == "prompt" and status == "parse_error" and scorable:
        verdict = "fail"  # seed 002's fallback verdict, whatever the thresholds
    if verdict not in (None, "fail"):
        if judge == "rag" and row["faithfulness"] == 0.0:
            clamps.append("critical_hallucination_fail:verdict")
            verdict = "fail"
        elif judge == "prompt" and row["required_unsatisfied"]:
            clamps.append("required_rubric_fail:verdict")
            verdict = "fail"
    row["verdict"] = verdict
    row["clamps_applied"] = clamps
    return row


# --------------------------------------------------------------------------------------------
# A whole table


def _divide(expr: pl.Expr, constant: float) -> pl.Expr:
    """``expr / constant`` as a true IEEE division (a scalar divisor becomes an inexact product)."""
    return expr / (expr * 0.0 + constant)


def _outside_unit(expr: pl.Expr) -> pl.Expr:
    return (expr < 0.0) | (expr > 1.0)


def _rule_mask(rules: list[tuple[pl.Expr, str]], offset: int = 0) -> pl.Expr:
    """Bit ``offset + i`` set where rule ``i`` holds (a null condition does not hold)."""
    return pl.sum_horizontal([c.fill_null(False).cast(pl.Int64) * (1 << (offset + i)) for i, (c, _) in enumerate(rules)])


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


def score_table(parsed: pl.DataFrame | pl.LazyFrame, thresholds: Thresholds | None = None) -> pl.DataFrame:
    """Apply CONTRACT §2.2–2.5 to a table of parsed rows (every judge mixed); same digits as
    :func:`score_row`. Adds ``clamps_applied`` and ``verdict``; replaces metrics and ``score``."""
    thresholds = thresholds or Thresholds()
    frame = parsed.lazy()
    judge, status = pl.col("judge"), pl.col("judge_status")
    is_rag = (judge == "rag") & (status == "ok")
    is_masis = (judge == "masis") & (status == "ok")
    is_prompt = (judge == "prompt") & status.is_in(["ok", "parse_error"]) & pl.col("score").is_not_null()

    labels: list[tuple[pl.Expr, str]] = []  # (condition, clamp label), in clamps_applied order
    # rag: clamp and round each metric, drop similarity without a reference.
    rag_updates = {}
    for metric in RAG_METRICS:
        value = pl.col(metric)
        labels.append((is_rag & _outside_unit(value), f"clamp_0_1:{metric}"))
        rag_updates[metric] = round_like_python(value.clip(0.0, 1.0), 2)
    labels.append((is_rag & pl.col("reference_missing") & pl.col("semantic_similarity").is_not_null(),
                        "no_reference_null:semantic_similarity"))
    # masis: scale, clamp, then cap faithfulness.
    masis_updates = {}
    for dimension in MASIS_DIMENSIONS:
        value = pl.col(dimension)
        scaled = pl.when(value > 1).then(_divide(value, 100.0)).otherwise(value)
        labels.append((is_masis & (value > 1), f"scale_100:{dimension}"))
        labels.append((is_masis & _outside_unit(scaled), f"clamp_0_1:{dimension}"))
        masis_updates[dimension] = scaled.clip(0.0, 1.0)
    flagged = pl.col("hallucination_detected").fill_null(False) | (pl.col("invalid_citations").list.len() > 0)
    uncited = pl.col("uncited_claim_count")
    faith = masis_updates["faithfulness"]
    capped_04 = pl.when(flagged & (faith > 0.4)).then(pl.lit(0.4)).otherwise(faith)
    labels.append((is_masis & flagged & (faith > 0.4), "invalid_citation_cap_0.4:faithfulness"))
    labels.append((is_masis & (uncited >= 10) & (capped_04 > 0.3), "uncited_ge_10_cap_0.3:faithfulness"))
    labels.append((is_masis & (uncited >= 5) & (uncited < 10) & (capped_04 > 0.5),
                        "uncited_ge_5_cap_0.5:faithfulness"))
    masis_updates["faithfulness"] = (
        pl.when((uncited >= 10) & (capped_04 > 0.3)).then(pl.lit(0.3))
        .when((uncited >= 5) & (uncited < 10) & (capped_04 > 0.5)).then(pl.lit(0.5))
        .otherwise(capped_04)
    )
    labels.append((is_prompt & _outside_unit(pl.col("score")), "clamp_0_1:score"))

    metric_columns = {
        metric: pl.when(is_rag).then(rag_updates[metric]).otherwise(pl.col(metric)) for metric in RAG_METRICS
    }
    for dimension in MASIS_DIMENSIONS:
        base = metric_columns.get(dimension, pl.col(dimension))
        metric_columns[dimension] = pl.when(is_masis).then(masis_updates[dimension]).otherwise(base)
    metric_columns["semantic_similarity"] = (
        pl.when(is_rag & pl.col("reference_missing")).then(pl.lit(None, dtype=pl.Float64))
        .otherwise(metric_columns["semantic_similarity"])
    )
    frame = frame.with_columns(**metric_columns, _mask=_rule_mask(labels))

    numerator = pl.lit(0.0)
    denominator = pl.lit(0.0)
    for metric, weight in RAG_WEIGHTS:
        present = pl.col(metric).is_not_null()
        numerator = numerator + pl.when(present).then(pl.col(metric) * weight).otherwise(0.0)
        denominator = denominator + pl.when(present).then(pl.lit(weight)).otherwise(0.0)
    rag_score = round_like_python(numerator / denominator, 3)
    masis_total = pl.col("faithfulness") * 0.35
    for dimension, weight in MASIS_WEIGHTS[1:]:
        masis_total = masis_total + pl.col(dimension) * weight
    score = (
        pl.when(is_rag).then(pl.when(denominator > 0).then(rag_score))
        .when(is_masis).then(round_like_python(masis_total, 3))
        .when(is_prompt).then(pl.col("score").clip(0.0, 1.0))
        .otherwise(pl.lit(None, dtype=pl.Float64))
    )
    frame = frame.with_columns(score=score)
    by_threshold = (
        pl.when(pl.col("score").is_null()).then(pl.lit(None, dtype=pl.String))
        .when(pl.col("score") >= thresholds.pass_).then(pl.lit("pass"))
        .when(pl.col("score") >= thresholds.borderline).then(pl.lit("borderline"))
        .otherwise(pl.lit("fail"))
    )
    forced_rag = is_rag & (pl.col("faithfulness") == 0.0) & by_threshold.is_in(["pass", "borderline"])
    forced_prompt = (
        is_prompt & (status == "ok") & pl.col("required_unsatisfied").fill_null(False)
        & by_threshold.is_in(["pass", "borderline"])
    )
    fallback = is_prompt & (status == "parse_error")
    forced = [(forced_rag, "critical_hallucination_fail:verdict"), (forced_prompt, "required_rubric_fail:verdict")]
    frame = frame.with_columns(
        verdict=pl.when(forced_rag | forced_prompt | fallback).then(pl.lit("fail")).otherwise(by_threshold),
        _mask=pl.col("_mask") + _rule_mask(forced, offset=len(labels)),
    )
    return _with_clamps(frame.collect(), [label for _, label in labels + forced])
