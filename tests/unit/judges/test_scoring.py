"""CONTRACT §2.2–2.5 end to end (reply → parse_reply → score_row, the oracle), ``clamps_applied``,
and the equivalence of ``score_table`` (Polars, what the pipeline runs) with ``score_row``, digit
for digit."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pytest

from evaluation.contract.config import RULES_VERSION, InputRecord, Thresholds
from evaluation.contract.schemas import PARSED_SCHEMA
from evaluation.judges import (
    base_row,
    call_error_row,
    empty_answer_row,
    not_applicable_row,
    parse_reply,
    score_table,
    verdict,
)
from tests.factories import make_record
from tests.unit.judges.judge_oracle import score_row

OMIT = object()
RAG_METRICS = ("faithfulness", "context_relevance", "answer_relevance", "semantic_similarity")
MASIS_DIMENSIONS = ("faithfulness", "relevance", "completeness", "reasoning_quality")
LENIENT = Thresholds(**{"pass": 0.5, "borderline": 0.3})
STRICT = Thresholds(**{"pass": 0.9, "borderline": 0.5})




def reply(**fields: Any) -> str:
    """A JSON reply with the given fields (OMIT leaves one out)."""
    return json.dumps({k: v for k, v in fields.items() if v is not OMIT})


def rag(f: Any = 0.9, c: Any = 0.8, a: Any = 0.7, s: Any = OMIT, status: Any = "success", **extra: Any) -> str:
    return reply(evaluation_status=status, faithfulness=f, context_relevance=c, answer_relevance=a,
                 semantic_similarity=s, **extra)


def masis(f: Any = 0.9, r: Any = 0.8, c: Any = 0.7, q: Any = 0.6, **extra: Any) -> str:
    return reply(faithfulness=f, relevance=r, completeness=c, reasoning_quality=q, **extra)


def uncited(n: int, cite: str = "ctx-1") -> str:
    """An answer with one cited sentence and ``n`` uncited ones."""
    return " ".join([f"Water boils at 100 C [{cite}]."] + [f"Claim number {i} holds." for i in range(n)])


@dataclass(frozen=True)
class Case:
    judge: str
    raw: str | None
    expect: dict[str, Any]
    record: dict[str, Any] = field(default_factory=dict)
    thresholds: Thresholds | None = None


def case(judge: str, raw: str | None, case_id: str, record: dict[str, Any] | None = None,
         thresholds: Thresholds | None = None, **expect: Any) -> Any:
    return pytest.param(Case(judge, raw, expect, record or {}, thresholds), id=case_id)


def rag_nulls(status: str = "parse_error", **more: Any) -> dict[str, Any]:
    return {"judge_status": status, **dict.fromkeys(RAG_METRICS), "score": None, "verdict": None,
            "clamps_applied": [], **more}


def masis_nulls(**more: Any) -> dict[str, Any]:
    return {"judge_status": "parse_error", **dict.fromkeys(MASIS_DIMENSIONS), "score": None, "verdict": None,
            "clamps_applied": [], **more}


FALLBACK = {"judge_status": "parse_error", "score": 0.0, "verdict": "fail", "hits": [], "misses": [],
            "clamps_applied": []}

# --------------------------------------------------------------------------------------------
# §2.2 rag

RAG_CASES = [
    # step 1: no object, or a metric that is not a number or null
    case("rag", "I cannot judge this answer.", "no-object", **rag_nulls()),
    case("rag", "", "empty-reply", **rag_nulls()),
    case("rag", None, "none-reply", **rag_nulls()),
    case("rag", '{"evaluation_status": "success", "faithfulness": 0.9,', "truncated", **rag_nulls()),
    case("rag", rag(f="0.9"), "metric-string", **rag_nulls()),
    case("rag", rag(a=True), "metric-true", **rag_nulls()),
    case("rag", rag(c=False), "metric-false", **rag_nulls()),
    case("rag", rag(s=[0.5]), "metric-list", **rag_nulls()),
    case("rag", rag(s="NaN"), "metric-nan-string", **rag_nulls()),
    case("rag", rag(f=0.9).replace("0.9", "NaN"), "metric-nan-literal", **rag_nulls()),
    case("rag", rag(f="bad", status="failed", reason="r"), "bad-metric-before-failed-status", **rag_nulls()),
    # step 2: status
    case("rag", reply(evaluation_status="failed", reason="malformed_input", error="Trace: boom", faithfulness=0.9,
                      context_relevance=None), "judge-failed",
         **rag_nulls("judge_failed", reason="malformed_input", error="Trace: boom")),
    case("rag", reply(evaluation_status="failed"), "judge-failed-bare",
         **rag_nulls("judge_failed", reason=None, error=None)),
    case("rag", rag(status=OMIT), "status-missing", **rag_nulls()),
    case("rag", rag(status=None), "status-null", **rag_nulls()),
    case("rag", rag(status="Success"), "status-Success", **rag_nulls()),
    case("rag", rag(status="SUCCESS"), "status-upper", **rag_nulls()),
    case("rag", rag(status="ok"), "status-ok", **rag_nulls()),
    case("rag", rag(status=" success"), "status-padded", **rag_nulls()),
    case("rag", rag(status="Failed"), "status-Failed", **rag_nulls()),
    case("rag", rag(status=True), "status-true", **rag_nulls()),
    # step 3: required metrics on success
    case("rag", rag(f=OMIT), "faithfulness-missing", **rag_nulls()),
    case("rag", rag(f=None), "faithfulness-null", **rag_nulls()),
    case("rag", rag(c=OMIT), "context-relevance-missing", **rag_nulls()),
    case("rag", rag(a=None), "answer-relevance-null", **rag_nulls()),
    case("rag", rag(f=0.9, c=0.7, a=0.8), "similarity-missing-renormalised", judge_status="ok", faithfulness=0.9,
         context_relevance=0.7, answer_relevance=0.8, semantic_similarity=None, score=0.829, verdict="pass",
         clamps_applied=[]),
    case("rag", rag(f=0.9, c=0.7, a=0.8, s=None), "similarity-null-renormalised", semantic_similarity=None,
         score=0.829, verdict="pass", clamps_applied=[]),
    case("rag", rag(f=0.9, c=0.7, a=0.8, s=0.6), "all-four-metrics", judge_status="ok", semantic_similarity=0.6,
         score=0.795, verdict="borderline", clamps_applied=[]),
    case("rag", rag(f=1, c=1, a=1, s=1), "ints", faithfulness=1.0, score=1.0, verdict="pass", clamps_applied=[]),
    case("rag", rag(f=1.0, c=0.2, a=0.5), "renormalised-three", score=0.682, verdict="borderline"),
    # step 3: clamp then round
    case("rag", rag(f=1.5, c=1, a=1, s=1), "clamp-above-one", faithfulness=1.0, score=1.0, verdict="pass",
         clamps_applied=["clamp_0_1:faithfulness"]),
    case("rag", rag(f=1, c=-0.2, a=1, s=1), "clamp-negative", context_relevance=0.0, score=0.85, verdict="pass",
         clamps_applied=["clamp_0_1:context_relevance"]),
    case("rag", rag(f=0.5, c=0.5, a=85, s=0.5), "percent-scale-clamps-not-scales", answer_relevance=1.0,
         score=0.65, verdict="borderline", clamps_applied=["clamp_0_1:answer_relevance"]),
    case("rag", rag(f=1, c=1, a=1, s=1e308), "huge-similarity", semantic_similarity=1.0, score=1.0,
         clamps_applied=["clamp_0_1:semantic_similarity"]),
    case("rag", rag(f=0.125, c=0.135, a=0.005, s=0.995), "round-half-even-binary", judge_status="ok",
         faithfulness=0.12, context_relevance=0.14, answer_relevance=0.01, semantic_similarity=0.99, score=0.221,
         verdict="fail", clamps_applied=[]),
    case("rag", rag(f=0.675, c=0.675, a=0.675, s=0.675), "round-0.675", faithfulness=0.68, score=0.68,
         verdict="borderline", clamps_applied=[]),
    case("rag", rag(f=0.12345, c=0.99999, a=1e-9), "round-two-decimals", faithfulness=0.12, context_relevance=1.0,
         answer_relevance=0.0, clamps_applied=[]),
    case("rag", rag(f=-0.0, c=1, a=1, s=1), "negative-zero-faithfulness", score=0.6, verdict="fail",
         clamps_applied=["critical_hallucination_fail:verdict"]),
    # step 4: semantic_similarity without a reference
    *[
        case("rag", rag(f=0.9, c=0.7, a=0.8, s=0.9), f"reference-{name}-nulls-similarity",
             record={"reference": reference}, judge_status="ok", semantic_similarity=None, score=0.829,
             verdict="pass", clamps_applied=["no_reference_null:semantic_similarity"])
        for name, reference in (("None", None), ("empty", ""), ("blank", "  "), ("padded-None", " None "),
                                ("none", "none"), ("NONE", "NONE"), ("tab-none", "\tnone\n"))
    ],
    case("rag", rag(f=0.9, c=0.7, a=0.8, s=None), "reference-missing-similarity-null-no-label",
         record={"reference": None}, semantic_similarity=None, score=0.829, clamps_applied=[]),
    case("rag", rag(f=0.9, c=0.7, a=0.8, s=1.5), "reference-missing-similarity-clamped-then-nulled",
         record={"reference": "none"}, semantic_similarity=None, score=0.829,
         clamps_applied=["clamp_0_1:semantic_similarity", "no_reference_null:semantic_similarity"]),
    case("rag", rag(f=0.9, c=0.7, a=0.8, s=0.0), "reference-present-similarity-zero-kept",
         record={"reference": "nonexistent"}, semantic_similarity=0.0, score=0.705, verdict="borderline",
         clamps_applied=[]),
    # step 5: verdicts at the edges
    case("rag", rag(f=0.6, c=0.6, a=0.6, s=0.6), "score-0.6-borderline", score=0.6, verdict="borderline"),
    case("rag", rag(f=0.8, c=0.8, a=0.8, s=0.8), "score-0.8-pass", score=0.8, verdict="pass"),
    case("rag", rag(f=0.59, c=0.59, a=0.59, s=0.59), "score-0.59-fail", score=0.59, verdict="fail"),
    case("rag", rag(f=0.79, c=0.79, a=0.79, s=0.79), "score-0.79-borderline", score=0.79, verdict="borderline"),
    case("rag", rag(f=0.795, c=0.795, a=0.795, s=0.795), "metrics-round-up-to-0.8-pass", faithfulness=0.8,
         score=0.8, verdict="pass", clamps_applied=[]),
    case("rag", rag(f=0.595, c=0.595, a=0.595, s=0.595), "metrics-round-down-to-0.59-fail", faithfulness=0.59,
         score=0.59, verdict="fail", clamps_applied=[]),
    case("rag", rag(f=0.8, c=0.8, a=0.8, s=0.8), "strict-0.8-borderline", thresholds=STRICT, score=0.8,
         verdict="borderline"),
    # step 5: critical hallucination
    case("rag", rag(f=0.0, c=1, a=1, s=1), "faithfulness-zero-forces-fail", faithfulness=0.0, score=0.6,
         verdict="fail", clamps_applied=["critical_hallucination_fail:verdict"]),
    case("rag", rag(f=0.0, c=1, a=1, s=1), "faithfulness-zero-fails-even-when-score-passes", thresholds=LENIENT,
         score=0.6, verdict="fail", clamps_applied=["critical_hallucination_fail:verdict"]),
    case("rag", rag(f=-0.2, c=1, a=1, s=1), "negative-faithfulness-clamped-then-fail", faithfulness=0.0, score=0.6,
         verdict="fail", clamps_applied=["clamp_0_1:faithfulness", "critical_hallucination_fail:verdict"]),
    case("rag", rag(f=0.004, c=1, a=1, s=1), "faithfulness-rounding-to-zero-fails", faithfulness=0.0, score=0.6,
         verdict="fail", clamps_applied=["critical_hallucination_fail:verdict"]),
    case("rag", rag(f=0.005, c=1, a=1, s=1), "faithfulness-rounding-to-0.01-not-critical", faithfulness=0.01,
         score=0.604, verdict="borderline", clamps_applied=[]),
    case("rag", rag(f=0.0, c=0.5, a=0.5, s=0.5), "faithfulness-zero-already-fail-no-label", score=0.3,
         verdict="fail", clamps_applied=[]),
    # step 6: the row records the normalised goal
    case("rag", rag(), "goal-legal", record={"evaluation_goal": " Legal "}, evaluation_goal="recall"),
    case("rag", rag(), "goal-creative", record={"evaluation_goal": "CREATIVE"}, evaluation_goal="precision"),
    case("rag", rag(), "goal-recall-literal", record={"evaluation_goal": "recall"}, evaluation_goal="balanced"),
    case("rag", "garbage", "goal-kept-on-parse-error", record={"evaluation_goal": "medical"},
         evaluation_goal="recall", judge_status="parse_error"),
]

# --------------------------------------------------------------------------------------------
# §2.3 masis

CLEAN_AUDIT = {"citations": ["ctx-1"], "invalid_citations": [], "uncited_claim_count": 0,
               "hallucination_detected": False}
BAD_CITE = {"answer": "Water boils at 100 C [ctx-9]."}

MASIS_CASES = [
    case("masis", "The answer is fine.", "no-object", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", None, "none-reply", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", "no object", "no-object-audit-filled", record=BAD_CITE,
         **masis_nulls(citations=["ctx-9"], invalid_citations=["ctx-9"], uncited_claim_count=0,
                       hallucination_detected=True)),
    case("masis", masis(r="0.8"), "dimension-string", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", masis(c=True), "dimension-bool", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", masis(q=None), "dimension-null", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", masis(q=OMIT), "dimension-missing", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", masis(f=[1]), "dimension-list", **masis_nulls(**CLEAN_AUDIT)),
    case("masis", masis(), "plain", judge_status="ok", faithfulness=0.9, relevance=0.8, completeness=0.7,
         reasoning_quality=0.6, score=0.78, verdict="borderline", clamps_applied=[], **CLEAN_AUDIT),
    case("masis", masis(overall_score=0.99), "judge-overall-ignored", score=0.78, verdict="borderline"),
    case("masis", masis(overall_score="high"), "judge-overall-garbage-ignored", judge_status="ok", score=0.78),
    # scale mismatch, then clamp
    case("masis", masis(f=85, r=0.9, c=0.8, q=0.7), "percent-scaled", faithfulness=0.85, score=0.827,
         verdict="pass", clamps_applied=["scale_100:faithfulness"]),
    case("masis", masis(f=0.9, r=150, c=0.8, q=0.7), "150-scaled-then-clamped", relevance=1.0, score=0.87,
         clamps_applied=["scale_100:relevance", "clamp_0_1:relevance"]),
    case("masis", masis(f=0.9, r=0.8, c=100, q=0.7), "100-scaled-to-1", completeness=1.0, score=0.87,
         clamps_applied=["scale_100:completeness"]),
    case("masis", masis(f=1, r=1, c=1, q=1), "one-not-scaled", faithfulness=1.0, score=1.0, verdict="pass",
         clamps_applied=[]),
    case("masis", masis(f=0.9, r=0.8, c=0.7, q=-0.3), "negative-clamped", reasoning_quality=0.0, score=0.69,
         clamps_applied=["clamp_0_1:reasoning_quality"]),
    case("masis", masis(f=0.777, r=0.5, c=0.5, q=0.5), "dimensions-not-rounded", faithfulness=0.777, score=0.597,
         verdict="fail", clamps_applied=[]),
    case("masis", masis(f=85.55, r=0.5, c=0.5, q=0.5), "scaled-not-rounded", faithfulness=85.55 / 100,
         score=0.624, clamps_applied=["scale_100:faithfulness"]),
    # faithfulness caps
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "invalid-citation-cap", record=BAD_CITE, faithfulness=0.4,
         score=0.725, verdict="borderline", hallucination_detected=True, invalid_citations=["ctx-9"],
         clamps_applied=["invalid_citation_cap_0.4:faithfulness"]),
    case("masis", masis(f=0.3, r=0.9, c=0.9, q=0.9), "invalid-citation-below-cap", record=BAD_CITE,
         faithfulness=0.3, score=0.69, clamps_applied=[]),
    case("masis", masis(f=0.4, r=0.9, c=0.9, q=0.9), "invalid-citation-at-cap", record=BAD_CITE, faithfulness=0.4,
         score=0.725, clamps_applied=[]),
    case("masis", masis(f=85, r=0.9, c=0.9, q=0.9), "scaled-then-capped", record=BAD_CITE, faithfulness=0.4,
         clamps_applied=["scale_100:faithfulness", "invalid_citation_cap_0.4:faithfulness"]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "uncited-4-no-cap", record={"answer": uncited(4)},
         uncited_claim_count=4, faithfulness=0.9, score=0.9, verdict="pass", clamps_applied=[]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "uncited-5-cap-0.5", record={"answer": uncited(5)},
         uncited_claim_count=5, faithfulness=0.5, score=0.76, verdict="borderline",
         clamps_applied=["uncited_ge_5_cap_0.5:faithfulness"]),
    case("masis", masis(f=0.45, r=0.9, c=0.9, q=0.9), "uncited-5-below-cap", record={"answer": uncited(5)},
         faithfulness=0.45, score=0.743, clamps_applied=[]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "uncited-9-cap-0.5", record={"answer": uncited(9)},
         uncited_claim_count=9, faithfulness=0.5, clamps_applied=["uncited_ge_5_cap_0.5:faithfulness"]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "uncited-10-cap-0.3", record={"answer": uncited(10)},
         uncited_claim_count=10, faithfulness=0.3, score=0.69, clamps_applied=["uncited_ge_10_cap_0.3:faithfulness"]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "uncited-12-cap-0.3", record={"answer": uncited(12)},
         faithfulness=0.3, clamps_applied=["uncited_ge_10_cap_0.3:faithfulness"]),
    case("masis", masis(f=0.3, r=0.9, c=0.9, q=0.9), "uncited-10-at-cap", record={"answer": uncited(10)},
         faithfulness=0.3, clamps_applied=[]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "hedged-sentences-not-counted",
         record={"answer": uncited(4) + " The dose is not provided. There is insufficient evidence for more."},
         uncited_claim_count=4, faithfulness=0.9, clamps_applied=[]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "invalid-and-10-uncited", record={"answer": uncited(10, "x")},
         faithfulness=0.3, hallucination_detected=True,
         clamps_applied=["invalid_citation_cap_0.4:faithfulness", "uncited_ge_10_cap_0.3:faithfulness"]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "invalid-and-5-uncited", record={"answer": uncited(5, "x")},
         faithfulness=0.4, clamps_applied=["invalid_citation_cap_0.4:faithfulness"]),
    # verdicts; no critical-hallucination rule for masis
    case("masis", masis(f=0, r=1, c=1, q=1), "faithfulness-zero-not-forced", faithfulness=0.0, score=0.65,
         verdict="borderline", clamps_applied=[]),
    case("masis", masis(f=0.8, r=0.8, c=0.8, q=0.8), "score-0.8-pass", score=0.8, verdict="pass"),
    case("masis", masis(f=0.6, r=0.6, c=0.6, q=0.6), "score-0.6-borderline", score=0.6, verdict="borderline"),
    case("masis", masis(f=0.7996, r=0.7996, c=0.7996, q=0.7996), "score-rounds-up-to-0.8-pass", faithfulness=0.7996,
         score=0.8, verdict="pass"),
    case("masis", masis(f=0.7995, r=0.7995, c=0.7995, q=0.7995), "score-tie-rounds-to-0.799", score=0.799,
         verdict="borderline"),
    case("masis", masis(f=0.5, r=0.9, c=0.9, q=0.9), "uncited-5-at-cap", record={"answer": uncited(5)},
         faithfulness=0.5, score=0.76, clamps_applied=[]),
    case("masis", masis(f=0.9, r=0.9, c=0.9, q=0.9), "strict-thresholds", thresholds=STRICT, score=0.9,
         verdict="pass"),
    case("masis", masis(f=0.8, r=0.8, c=0.8, q=0.8), "strict-0.8-borderline", thresholds=STRICT, verdict="borderline"),
    case("masis", masis(improvement_suggestions=["Cite ctx-1 for every claim.", "Answer the unit question."]),
         "suggestions-kept", improvement_suggestions=["Cite ctx-1 for every claim.", "Answer the unit question."]),
    case("masis", masis(f=-0.0, r=-0.0, c=-0.0, q=-0.0), "negative-zero-dimensions", verdict="fail",
         clamps_applied=[]),
]

# --------------------------------------------------------------------------------------------
# §2.4 prompt

RUBRICS = [
    {"id": "r1", "description": "States 100 C."},  # required, weight 1 by default
    {"id": "r2", "description": "Names sea level.", "required": False, "weight": 2},
    {"id": "r3", "description": "Is polite.", "required": False},
]
RUBRIC = {"rubrics": RUBRICS}
HEAVY = {"rubrics": [{"id": "must", "description": "Is safe."},
                     {"id": "big", "description": "Is complete.", "required": False, "weight": 9}]}


def checks(*satisfied: tuple[str, Any], **extra: Any) -> str:
    return reply(checks=[{"id": i, "satisfied": s, "reasoning": f"why {i}"} for i, s in satisfied], **extra)


PROMPT_CASES = [
    # freeform: clamp, not rounded
    case("prompt", reply(score=1.5), "clamp-1.5", judge_status="ok", score=1.0, verdict="pass",
         clamps_applied=["clamp_0_1:score"]),
    case("prompt", reply(score=85), "clamp-85", score=1.0, verdict="pass", clamps_applied=["clamp_0_1:score"]),
    case("prompt", reply(score=-0.1), "clamp-negative", score=0.0, verdict="fail",
         clamps_applied=["clamp_0_1:score"]),
    case("prompt", reply(score=0.777), "not-rounded", judge_status="ok", score=0.777, verdict="borderline",
         clamps_applied=[]),
    case("prompt", reply(score=1), "int-one", score=1.0, verdict="pass", clamps_applied=[]),
    case("prompt", reply(score=0), "int-zero-ok", judge_status="ok", score=0.0, verdict="fail", clamps_applied=[]),
    case("prompt", reply(score=-0.0), "negative-zero", verdict="fail", clamps_applied=[]),
    case("prompt", reply(score=0.8), "0.8-pass", score=0.8, verdict="pass"),
    case("prompt", reply(score=0.7999), "0.7999-borderline", score=0.7999, verdict="borderline"),
    case("prompt", reply(score=0.6), "0.6-borderline", score=0.6, verdict="borderline"),
    case("prompt", reply(score=0.5999), "0.5999-fail", score=0.5999, verdict="fail"),
    case("prompt", reply(score=0.85), "strict-0.85-borderline", thresholds=STRICT, verdict="borderline"),
    case("prompt", reply(score=0.9), "strict-0.9-pass", thresholds=STRICT, verdict="pass"),
    case("prompt", reply(score=0.5), "strict-0.5-borderline", thresholds=STRICT, verdict="borderline"),
    case("prompt", reply(score=0.4999), "strict-0.4999-fail", thresholds=STRICT, verdict="fail"),
    case("prompt", reply(score=0.5, hits=[" a ", "", 3, "b"], misses="c", reasoning="r"), "hits-misses-kept",
         hits=["a", "b"], misses=[], reasoning="r", score=0.5),
    case("prompt", reply(score=0.7), "expected-outcome-only", record={"reference": None, "expected_outcome": "x"},
         judge_status="ok", score=0.7, verdict="borderline"),
    # freeform fallback
    case("prompt", "Looks good to me!", "fallback-no-object", **FALLBACK),
    case("prompt", None, "fallback-none-reply", **FALLBACK),
    case("prompt", reply(score="0.9", hits=["a"]), "fallback-string-score", **FALLBACK),
    case("prompt", reply(score=True, hits=["a"]), "fallback-bool-score", **FALLBACK),
    case("prompt", reply(score=None), "fallback-null-score", **FALLBACK),
    case("prompt", reply(score=[0.9]), "fallback-list-score", **FALLBACK),
    case("prompt", reply(hits=["a"], reasoning="no score"), "fallback-object-without-score", **FALLBACK),
    case("prompt", '{"score": NaN}', "fallback-nan", **FALLBACK),
    case("prompt", '{"score": 0.9,}', "fallback-trailing-comma", **FALLBACK),
    case("prompt", reply(checks=[{"id": "r1", "satisfied": True}]), "fallback-checks-in-freeform", **FALLBACK),
    # rubric mode
    case("prompt", checks(("r1", True), ("r2", True), ("r3", True)), "rubric-all", record=RUBRIC,
         judge_status="ok", score=1.0, verdict="pass", clamps_applied=[]),
    case("prompt", checks(("r1", True), ("r2", True), ("r3", False)), "rubric-0.75", record=RUBRIC, score=0.75,
         verdict="borderline", clamps_applied=[]),
    case("prompt", checks(("r1", True), ("r2", True), ("r3", False)), "rubric-lenient-pass", record=RUBRIC,
         thresholds=LENIENT, score=0.75, verdict="pass", clamps_applied=[]),
    case("prompt", checks(("r1", False), ("r2", True), ("r3", True)), "rubric-required-miss-fails", record=RUBRIC,
         score=0.75, verdict="fail", clamps_applied=["required_rubric_fail:verdict"]),
    case("prompt", checks(("must", False), ("big", True)), "rubric-required-miss-at-0.9", record=HEAVY, score=0.9,
         verdict="fail", clamps_applied=["required_rubric_fail:verdict"]),
    case("prompt", checks(("big", True)), "rubric-required-not-evaluated", record=HEAVY, score=0.9, verdict="fail",
         misses=["[must] Is safe.: not evaluated"], clamps_applied=["required_rubric_fail:verdict"]),
    case("prompt", checks(("must", True)), "rubric-optional-not-evaluated", record=HEAVY, score=0.1,
         verdict="fail", clamps_applied=[]),
    case("prompt", checks(("r1", False)), "rubric-required-miss-already-fail", record=RUBRIC, score=0.0,
         verdict="fail", clamps_applied=[]),
    case("prompt", checks(("r1", True), ("r2", "true"), ("r3", 1)), "rubric-only-literal-true", record=RUBRIC,
         score=0.25, verdict="fail"),
    case("prompt", checks(("r1", False), ("r1", True), ("r2", True), ("r2", False), ("r3", True)),
         "rubric-first-check-per-id", record=RUBRIC, score=0.75, verdict="fail",
         clamps_applied=["required_rubric_fail:verdict"]),
    case("prompt", checks(("r1", True), ("r2", True), ("r3", True), ("r9", False), ("R1", False)),
         "rubric-unknown-ids-ignored", record=RUBRIC, score=1.0, verdict="pass"),
    case("prompt", checks(("a", True), ("b", True)), "rubric-zero-total-weight",
         record={"rubrics": [{"id": "a", "description": "A.", "weight": 0, "required": False},
                             {"id": "b", "description": "B.", "weight": 0, "required": False}]},
         judge_status="ok", score=0.0, verdict="fail", clamps_applied=[]),
    case("prompt", checks(("a", True), ("b", True)), "rubric-zero-weight-item",
         record={"rubrics": [{"id": "a", "description": "A.", "weight": 0},
                             {"id": "b", "description": "B.", "required": False}]},
         score=1.0, verdict="pass"),
    case("prompt", checks(("a", False), ("b", True)), "rubric-zero-weight-required-miss",
         record={"rubrics": [{"id": "a", "description": "A.", "weight": 0},
                             {"id": "b", "description": "B.", "required": False}]},
         score=1.0, verdict="fail", clamps_applied=["required_rubric_fail:verdict"]),
    case("prompt", checks(("r1", True), ("r2", False)), "rubric-third", record=RUBRIC, score=0.25,
         hits=["[r1] States 100 C.: why r1"],
         misses=["[r2] Names sea level.: why r2", "[r3] Is polite.: not evaluated"]),
    case("prompt", reply(checks={"r1": True}), "rubric-checks-object-fallback", record=RUBRIC, **FALLBACK),
    case("prompt", reply(checks=None), "rubric-checks-null-fallback", record=RUBRIC, **FALLBACK),
    case("prompt", reply(checks="r1"), "rubric-checks-string-fallback", record=RUBRIC, **FALLBACK),
    case("prompt", "no json here", "rubric-no-object-fallback", record=RUBRIC, **FALLBACK),
    case("prompt", reply(score=1.0), "rubric-score-object-fallback", record=RUBRIC, **FALLBACK),
]

ALL_CASES = RAG_CASES + MASIS_CASES + PROMPT_CASES


def _same(actual: Any, expected: Any) -> bool:
    """Equal, and for floats the same digits (repr), so 0.12 is not 0.12000000000000001."""
    if isinstance(actual, float) or isinstance(expected, float):
        return isinstance(actual, float) and float(expected) == actual and repr(float(expected)) == repr(actual)
    return actual == expected


def _final(c: Case) -> tuple[dict[str, Any], dict[str, Any]]:
    parsed = parse_reply(c.judge, make_record(**c.record), c.raw)  # type: ignore[arg-type]
    return parsed, score_row(parsed, c.thresholds)


def _check(c: Case) -> None:
    _parsed, final = _final(c)
    wrong = {k: (final[k], v) for k, v in c.expect.items() if not _same(final[k], v)}
    assert not wrong, f"(actual, expected) by column: {wrong}"


@pytest.mark.parametrize("c", RAG_CASES)
def test_rag_rules(c: Case) -> None:
    _check(c)


@pytest.mark.parametrize("c", MASIS_CASES)
def test_masis_rules(c: Case) -> None:
    _check(c)


@pytest.mark.parametrize("c", PROMPT_CASES)
def test_prompt_rules(c: Case) -> None:
    _check(c)


@pytest.mark.parametrize("c", ALL_CASES)
def test_score_row_does_not_mutate_the_parsed_row(c: Case) -> None:
    parsed = parse_reply(c.judge, make_record(**c.record), c.raw)  # type: ignore[arg-type]
    before = json.dumps(parsed, sort_keys=True, default=str)
    score_row(parsed, c.thresholds)
    assert json.dumps(parsed, sort_keys=True, default=str) == before


# --------------------------------------------------------------------------------------------
# §2.5 verdicts, call errors and skips


def verdict_for(score: float | None, thresholds: Thresholds) -> str | None:
    """The library's verdict expression on one score."""
    return pl.select(verdict(pl.lit(score, dtype=pl.Float64), thresholds)).item()


@pytest.mark.parametrize(
    ("score", "thresholds", "expected"),
    [
        pytest.param(None, Thresholds(), None, id="no-score"),
        pytest.param(1.0, Thresholds(), "pass", id="1.0"),
        pytest.param(0.8, Thresholds(), "pass", id="0.8"),
        pytest.param(0.7999, Thresholds(), "borderline", id="0.7999"),
        pytest.param(0.6, Thresholds(), "borderline", id="0.6"),
        pytest.param(0.5999, Thresholds(), "fail", id="0.5999"),
        pytest.param(0.0, Thresholds(), "fail", id="0.0"),
        pytest.param(0.9, STRICT, "pass", id="strict-0.9"),
        pytest.param(0.8999, STRICT, "borderline", id="strict-0.8999"),
        pytest.param(0.5, STRICT, "borderline", id="strict-0.5"),
        pytest.param(0.4999, STRICT, "fail", id="strict-0.4999"),
        pytest.param(0.5, LENIENT, "pass", id="lenient-0.5"),
    ],
)
def test_verdict_for(score: float | None, thresholds: Thresholds, expected: str | None) -> None:
    assert verdict_for(score, thresholds) == expected


def test_thresholds_alias_and_order() -> None:
    assert Thresholds().pass_ == 0.8 and Thresholds().borderline == 0.6
    assert (STRICT.pass_, STRICT.borderline) == (0.9, 0.5)
    with pytest.raises(ValueError):
        Thresholds(**{"pass": 0.5, "borderline": 0.6})


def _unscored_rows() -> list[Any]:
    rows = []
    record = make_record(expected_outcome="x")
    for judge in ("rag", "masis", "prompt"):
        rows.append(pytest.param(call_error_row(judge, record, "Timeout: retries exhausted"),  # type: ignore[arg-type]
                                 id=f"{judge}-call_error"))
        for reason in ("not_applicable", "budget_exhausted", "sampled_out"):
            rows.append(pytest.param(not_applicable_row(judge, record, reason),  # type: ignore[arg-type]
                                     id=f"{judge}-skipped-{reason}"))
    stale = call_error_row("prompt", record, "quota")
    stale["score"] = 0.0
    rows.append(pytest.param(stale, id="prompt-call_error-with-stale-zero"))
    return rows


@pytest.mark.parametrize("row", _unscored_rows())
@pytest.mark.parametrize("thresholds", [Thresholds(), STRICT, Thresholds(**{"pass": 0.0, "borderline": 0.0})],
                         ids=["default", "strict", "zero"])
def test_call_error_and_skipped_have_no_score(row: dict[str, Any], thresholds: Thresholds) -> None:
    final = score_row(row, thresholds)
    assert final["score"] is None
    assert final["verdict"] is None
    assert final["clamps_applied"] == []
    table = score_table(_frame([row]), thresholds).row(0, named=True)
    assert table["score"] is None and table["verdict"] is None and table["clamps_applied"] == []


@pytest.mark.parametrize(
    ("raw", "record", "thresholds"),
    [
        pytest.param("no json", {}, Thresholds(**{"pass": 0.0, "borderline": 0.0}), id="freeform-zero-thresholds"),
        pytest.param("no json", {}, Thresholds(**{"borderline": 0.0}), id="freeform-zero-borderline"),
        pytest.param('{"score": "0.9"}', {}, Thresholds(**{"borderline": 0.0}), id="freeform-string-score"),
        pytest.param('{"checks": {}}', RUBRIC, Thresholds(**{"pass": 0.0, "borderline": 0.0}),
                     id="rubric-checks-not-a-list"),
    ],
)
def test_fallback_verdict_is_fail_whatever_the_thresholds(
    raw: str, record: dict[str, Any], thresholds: Thresholds
) -> None:
    """§2.4: the seed's fallback is score 0 *and* verdict fail (thresholds may go down to 0)."""
    parsed = parse_reply("prompt", make_record(**record), raw)
    assert parsed["judge_status"] == "parse_error"
    final = score_row(parsed, thresholds)
    assert (final["score"], final["verdict"]) == (0.0, "fail")
    table = score_table(_frame([parsed]), thresholds).row(0, named=True)
    assert (table["score"], table["verdict"]) == (0.0, "fail")


# --------------------------------------------------------------------------------------------
# score_table == score_row, digit for digit

_DEFAULTS: dict[str, Any] = {
    "judge_model": "offline/lexical", "prompt_version": "test@0", "rules_version": RULES_VERSION,
    "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "latency_ms": 0.0, "attempts": 1, "cached": False,
    "judged_at": None, "question_key": None, "decided_by": None, "cascade_calls": None,
}
_COMPARED = (*PARSED_SCHEMA, "verdict", "clamps_applied")


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    full = [{key: row.get(key, _DEFAULTS.get(key)) for key in PARSED_SCHEMA} for row in rows]
    return pl.DataFrame(full, schema=PARSED_SCHEMA)


def _mismatches(rows: list[dict[str, Any]], thresholds: Thresholds | None) -> list[str]:
    table = score_table(_frame(rows), thresholds).to_dicts()
    assert len(table) == len(rows)
    found = []
    for index, (row, from_table) in enumerate(zip(rows, table, strict=True)):
        from_row = _DEFAULTS | score_row(row, thresholds)
        if [_digits(from_table[c]) for c in _COMPARED] == [_digits(from_row[c]) for c in _COMPARED]:
            continue
        for column in _COMPARED:
            if not _same(from_table[column], from_row[column]):
                found.append(f"row {index} ({row['judge']}/{row['judge_status']}) {column}: "
                             f"table {from_table[column]!r} != row {from_row[column]!r}")
    return found


def _digits(value: Any) -> Any:
    """A float as its digits (repr keeps the sign of zero and every digit); anything else as is."""
    return repr(value) if type(value) is float else value


@pytest.mark.parametrize("c", ALL_CASES)
def test_table_matches_row_for_every_case(c: Case) -> None:
    parsed = parse_reply(c.judge, make_record(**c.record), c.raw)  # type: ignore[arg-type]
    assert _mismatches([parsed], c.thresholds) == []


def test_table_matches_row_for_all_cases_in_one_table() -> None:
    """Every judge mixed in one table (the pipeline's shape), default thresholds."""
    rows = [parse_reply(p.values[0].judge, make_record(**p.values[0].record), p.values[0].raw)
            for p in ALL_CASES if "negative-zero" not in p.id]
    assert _mismatches(rows, None) == []


def _raw_value(rng: random.Random) -> float:
    """A value as a judge might send it: rounding ties, plain, edges, above 1, percent, negative."""
    kind = rng.randrange(11)
    if kind == 0:
        return rng.randrange(1000) / 1000 + 0.005
    if kind == 1:
        return rng.randrange(10000) / 10000 + 0.0005
    if kind == 2:
        return rng.randrange(101) / 100
    if kind == 3:
        return rng.random()
    if kind == 4:
        return rng.choice([0.0, 1.0, 0.4, 0.3, 0.5, 0.6, 0.8, 1e-12, 0.999999])
    if kind == 5:
        return 1 + rng.random()
    if kind == 6:
        return rng.randrange(1, 1001) / 10 + 0.05
    if kind == 7:
        return float(rng.randrange(1, 101))
    if kind == 8:
        return rng.uniform(100, 1e6)
    if kind == 9:
        return -rng.random() * rng.choice([1, 100])
    return rng.randrange(1000) / 1000


_STATUSES = ("ok", "ok", "ok", "ok", "ok", "ok", "parse_error", "judge_failed", "call_error", "skipped")


def _random_row(judge: str, rng: random.Random, record: InputRecord) -> dict[str, Any]:
    if rng.random() < 0.03:  # an empty answer: its own rule, whatever the thresholds
        row = empty_answer_row(judge, record)  # type: ignore[arg-type]
        row["record_id"] = f"rec-{rng.randrange(10**9)}"
        return dict(row)
    row = base_row(judge, record)  # type: ignore[arg-type]
    status = rng.choice(_STATUSES)
    if judge != "rag" and status == "judge_failed":
        status = "parse_error"
    row["judge_status"] = status
    row["record_id"] = f"rec-{rng.randrange(10**9)}"
    row["reference_missing"] = rng.random() < 0.3
    if judge == "rag":
        row["evaluation_goal"] = rng.choice(["recall", "precision", "balanced"])
        if status == "ok":
            for metric in RAG_METRICS:
                row[metric] = _raw_value(rng)
            if rng.random() < 0.35:
                row["semantic_similarity"] = None
            if rng.random() < 0.1:  # at the critical-hallucination rule: faithfulness landing at 0.0 or just not
                row["faithfulness"] = rng.choice([0.0, 0.004, 0.005, -0.3, 0.01])
        elif status == "judge_failed":
            row["reason"] = "malformed_input"
    elif judge == "masis":
        invalid = rng.choice([[], [], ["ctx-9"], ["x", " ctx-1"]])
        row.update(citations=["ctx-1", *invalid], invalid_citations=invalid, hallucination_detected=bool(invalid),
                   uncited_claim_count=rng.randrange(13))
        if status == "ok":
            for dimension in MASIS_DIMENSIONS:
                row[dimension] = _raw_value(rng)
            row["improvement_suggestions"] = rng.choice([[], ["Cite ctx-1."]])
    else:
        rubric = rng.random() < 0.5
        row["rubric_mode"] = rubric
        if status == "ok":
            if rubric:
                total = rng.randrange(0, 7)
                row["rubric_weight_total"] = float(total)
                row["rubric_weight_satisfied"] = float(rng.randrange(0, total + 1))
                row["required_unsatisfied"] = rng.random() < 0.4
                row["hits"] = ["[r1] d: ok"]
            else:
                row["score"] = _raw_value(rng)
                row["hits"], row["misses"] = ["a"], ["b"]
        elif status == "parse_error":
            row["score"] = 0.0
    return row


@pytest.mark.parametrize(("thresholds", "count"), [(None, 5000), (STRICT, 1500), (LENIENT, 1500)],
                         ids=["default", "strict", "lenient"])
@pytest.mark.parametrize("judge", ["rag", "masis", "prompt"])
def test_table_matches_row_on_random_rows(judge: str, thresholds: Thresholds | None, count: int) -> None:
    rng = random.Random(f"{judge}-{count}-20260301")
    record = make_record(answer=uncited(2, "ctx-9"))
    rows = [_random_row(judge, rng, record) for _ in range(count)]
    statuses = {row["judge_status"] for row in rows}
    assert statuses >= {"ok", "parse_error", "call_error", "skipped"}
    found = _mismatches(rows, thresholds)
    assert found == [], f"{len(found)} mismatches, first: {found[:5]}"


def test_random_rows_reach_every_rule() -> None:
    """The random rows fire every clamp label and every verdict (else the equivalence proves little)."""
    rng = random.Random("coverage")
    record = make_record(answer=uncited(2, "ctx-9"))
    rows = [_random_row(judge, rng, record) for judge in ("rag", "masis", "prompt") for _ in range(2000)]
    table = score_table(_frame(rows))
    labels = {label.split(":")[0] for labels in table["clamps_applied"].to_list() for label in labels}
    assert labels == {
        "clamp_0_1", "scale_100", "invalid_citation_cap_0.4", "uncited_ge_10_cap_0.3", "uncited_ge_5_cap_0.5",
        "no_reference_null", "critical_hallucination_fail", "required_rubric_fail", "empty_answer",
    }
    assert set(table["verdict"].to_list()) == {"pass", "borderline", "fail", None}
