"""The parsed row, typed: one row of ``PARSED_SCHEMA`` (:mod:`evaluation.contract.schemas`) as the judges
build it and the judge stage completes it. A TypedDict, not a model: a day holds millions of rows, and
``tests/unit/judges/test_parsed_rows.py`` keeps its keys and types those of the schema. No postponed
annotations here: Python 3.11 reads ``NotRequired`` only from evaluated ones."""

import datetime as dt
from typing import NotRequired, TypedDict

from evaluation.contract.config import JudgeName, JudgeStatus


class Spent(TypedDict):
    """What a call cost and when its reply came (``SPENT_SCHEMA``)."""

    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: float
    attempts: int
    cached: bool
    judged_at: dt.datetime | None


class ParsedRow(TypedDict):
    """A reply's values checked for type but not yet clamped, scaled or rounded. The judges fill
    every required key; the judge stage adds the others (the template, the rules and the spending)."""

    record_id: str
    conversation_id: str | None
    question_key: NotRequired[str]
    model: str
    judge: JudgeName
    judge_model: NotRequired[str]
    prompt_version: NotRequired[str]
    rules_version: NotRequired[str]
    judge_status: JudgeStatus
    score: float | None
    faithfulness: float | None
    relevance: float | None
    completeness: float | None
    reasoning_quality: float | None
    context_relevance: float | None
    answer_relevance: float | None
    semantic_similarity: float | None
    evaluation_goal: str | None
    hits: list[str]
    misses: list[str]
    reasoning: str | None
    explanations: str | None
    improvement_suggestions: list[str]
    citations: list[str]
    invalid_citations: list[str]
    uncited_claim_count: int | None
    hallucination_detected: bool | None
    reason: str | None
    error: str | None
    input_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    cost_usd: NotRequired[float]
    latency_ms: NotRequired[float]
    attempts: NotRequired[int]
    cached: NotRequired[bool]
    judged_at: NotRequired[dt.datetime | None]
    decided_by: NotRequired[str | None]
    cascade_calls: NotRequired[int | None]
    reference_missing: bool
    empty_answer: bool
    rubric_mode: bool
    required_unsatisfied: bool
    rubric_weight_satisfied: float | None
    rubric_weight_total: float | None


def parse_error(row: ParsedRow, reason: str) -> ParsedRow:
    """``row`` as a ``parse_error`` for ``reason``, its metrics left null (CONTRACT §2.2 (1)–(3),
    §2.3 (1)–(2))."""
    row.update({"judge_status": "parse_error", "reason": reason})
    return row
