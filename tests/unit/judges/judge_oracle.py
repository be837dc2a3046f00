"""A row-wise oracle of the judges' post-processing (CONTRACT §2.2–2.5), written from the contract
in plain Python, one parsed row at a time, for reading the rules and for checking
:func:`evaluation.judges.score_table` against it digit for digit.

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
``empty_answer``                           every judge: the answer is blank, score 0, ``fail``
==============================  ===========================================================
"""

from __future__ import annotations

import copy
from typing import Any

from evaluation.contract.config import Thresholds

RAG_METRICS = ("faithfulness", "context_relevance", "answer_relevance", "semantic_similarity")
MASIS_DIMENSIONS = ("faithfulness", "relevance", "completeness", "reasoning_quality")
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
    if row.get("rubric_mode") and row["judge_status"] == "ok":  # satisfied weight / total weight
        total = row["rubric_weight_total"]
        row["score"] = row["rubric_weight_satisfied"] / total if total > 0 else 0.0
    score = row["score"]
    if score is not None and not 0.0 <= score <= 1.0:
        clamps.append("clamp_0_1:score")
        row["score"] = _clamp_unit(score)


def score_row(parsed: dict[str, Any], thresholds: Thresholds | None = None) -> dict[str, Any]:
    """Apply CONTRACT §2.2–2.5 to one parsed row; returns a new row with score, verdict and
    ``clamps_applied``."""
    thresholds = thresholds or Thresholds()
    row = copy.deepcopy(parsed)
    if row.get("empty_answer"):  # §2.5: never sent to the judge; its metrics are already 0
        row.update(score=0.0, verdict="fail", clamps_applied=["empty_answer"])
        return row
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
