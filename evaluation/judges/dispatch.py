"""What takes a judge's name: whether a record is sent to it (:func:`route`), its prompt for a
record, the parsed row of its reply (or of a call that never returned or was never made), and the
scoring of a table of parsed rows of every judge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

import polars as pl

from evaluation.contract.config import InputRecord, JudgeName, Thresholds
from evaluation.judges import masis, rag
from evaluation.judges import prompt as prompt_judge
from evaluation.judges.extract import extract_json_object
from evaluation.judges.rendering import RenderedPrompt
from evaluation.judges.row import ParsedRow
from evaluation.judges.table import TableRules, apply_rules


class _Judge(Protocol):
    """What each judge's module provides."""

    PROMPT_VERSION: str

    def render(self, record: InputRecord) -> RenderedPrompt | None: ...
    def fill_row(self, row: ParsedRow, record: InputRecord) -> None: ...
    def parse(self, row: ParsedRow, reply: dict[str, Any] | None, record: InputRecord) -> ParsedRow: ...
    def table_rules(self) -> TableRules: ...


_JUDGES: dict[JudgeName, _Judge] = {"rag": rag, "masis": masis, "prompt": prompt_judge}

PROMPT_VERSIONS: dict[JudgeName, str] = {name: judge.PROMPT_VERSION for name, judge in _JUDGES.items()}


def render(judge: JudgeName, record: InputRecord) -> RenderedPrompt | None:
    """The prompt of ``judge`` for ``record``; None when the judge does not apply to it."""
    return _JUDGES[judge].render(record)


def base_row(judge: JudgeName, record: InputRecord) -> ParsedRow:
    """The part of a parsed row that does not depend on the reply: every reply column null or empty,
    and what the judge fills whatever the reply."""
    row: ParsedRow = {
        "record_id": record.record_id, "conversation_id": record.conversation_id, "model": record.model,
        "judge": judge, "judge_status": "ok", "score": None, "faithfulness": None, "relevance": None,
        "completeness": None, "reasoning_quality": None, "context_relevance": None, "answer_relevance": None,
        "semantic_similarity": None, "evaluation_goal": None, "hits": [], "misses": [], "reasoning": None,
        "explanations": None, "improvement_suggestions": [], "citations": [], "invalid_citations": [],
        "uncited_claim_count": None, "hallucination_detected": None, "reason": None, "error": None,
        "reference_missing": record.reference_missing, "empty_answer": False, "rubric_mode": False, "required_unsatisfied": False,
        "rubric_weight_satisfied": None, "rubric_weight_total": None,
    }
    _JUDGES[judge].fill_row(row, record)
    return row


def parse_reply(
    judge: JudgeName, record: InputRecord, raw_text: str | None, prompt: RenderedPrompt | None = None
) -> ParsedRow:
    """A parsed row for a reply that came back (CONTRACT §2.1, then the judge's parsing steps)."""
    row = base_row(judge, record)
    prompt = prompt if prompt is not None else render(judge, record)
    key_fields = prompt.key_fields if prompt is not None else ("score",)
    # Context and rubric ids are logged text rendered in the prompt too: a quote of one is no verdict either.
    ids = [c.id for c in record.contexts] + [r.id for r in record.rubrics or []]
    reply = extract_json_object(raw_text, key_fields, [*record.untrusted_texts(), *(i for i in ids if i)])
    return _JUDGES[judge].parse(row, reply, record)


def route(judge: JudgeName, record: InputRecord) -> RenderedPrompt | ParsedRow:
    """What judging ``record`` with ``judge`` takes: the prompt to send, or the parsed row it lands
    with no call. The one place that decides which (record, judge) pairs are sent to a judge: the
    judge stage (online and batch), the plan's estimate and the calibration's count of calls to make
    all ask here. A judge that does not apply (CONTRACT §2.4) gives a ``skipped`` row, an empty
    answer (§2.5) an :func:`empty_answer_row`."""
    prompt = render(judge, record)
    if prompt is None:
        return not_applicable_row(judge, record)
    if not record.answer.strip():
        return empty_answer_row(judge, record)
    return prompt


def empty_answer_row(judge: JudgeName, record: InputRecord) -> ParsedRow:
    """CONTRACT §2.5 empty answers: an ``ok`` row, each of the judge's metrics 0 (rag's semantic
    similarity stays null without a reference), never sent to the judge. :func:`score_table` gives
    it score 0, verdict ``fail`` and ``empty_answer`` in ``clamps_applied``."""
    row = base_row(judge, record)
    row.update({"empty_answer": True, "score": 0.0, "reason": "empty_answer"})
    if judge == "rag":
        row.update({"faithfulness": 0.0, "context_relevance": 0.0, "answer_relevance": 0.0,
                    "semantic_similarity": None if record.reference_missing else 0.0})
    elif judge == "masis":
        row.update({"faithfulness": 0.0, "relevance": 0.0, "completeness": 0.0, "reasoning_quality": 0.0})
    return row


def not_applicable_row(judge: JudgeName, record: InputRecord, reason: str = "not_applicable") -> ParsedRow:
    """A ``skipped`` parsed row (CONTRACT §2.5: not applicable, sampled out, budget exhausted)."""
    row = base_row(judge, record)
    row.update({"judge_status": "skipped", "reason": reason})
    return row


def call_error_row(judge: JudgeName, record: InputRecord, error: str) -> ParsedRow:
    """A ``call_error`` parsed row (CONTRACT §2.5): the call never returned a reply, so no score
    for any judge."""
    row = base_row(judge, record)
    row.update({"judge_status": "call_error", "error": error})
    return row


def score_table(
    parsed: pl.DataFrame | pl.LazyFrame,
    thresholds: Thresholds | None = None,
    *,
    per_judge: Mapping[JudgeName, Thresholds] | None = None,
) -> pl.DataFrame:
    """Every judge's post-processing (CONTRACT §2.2–2.5) over a table of parsed rows, every judge
    mixed: replaces the metrics and ``score``, adds ``verdict`` and ``clamps_applied``. Verdicts use
    ``per_judge[judge]`` where given, else ``thresholds`` (else the contract's 0.8 / 0.6)."""
    empty = pl.col("empty_answer").fill_null(False)
    # CONTRACT §2.5 empty answers, for every judge: score 0, verdict ``fail`` whatever the thresholds,
    # ``empty_answer`` in ``clamps_applied``; the metrics stay the zeros of :func:`empty_answer_row`.
    # An empty answer is scored by this rule alone: no judge's rule reads its zeros.
    rules = [TableRules(scored=empty, values={}, clamps=[(pl.lit(True), "empty_answer")], score=pl.lit(0.0),
                        fails=[(pl.lit(True), None)])]
    rules += [replace(rules_, scored=rules_.scored & ~empty) for rules_ in (j.table_rules() for j in _JUDGES.values())]
    return apply_rules(parsed, rules, thresholds or Thresholds(), per_judge or {})
