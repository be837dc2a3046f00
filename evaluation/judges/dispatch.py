"""What takes a judge's name: its prompt for a record, the parsed row of its reply (or of a call
that never returned), and the scoring of a table of parsed rows of every judge.

A *parsed row* holds a reply's values checked for type but not yet clamped, scaled or rounded;
:func:`score_table` applies each judge's rules to a whole table of them.
"""

from __future__ import annotations

from typing import Any, Protocol

import polars as pl

from evaluation.contract import InputRecord, JudgeName, Thresholds
from evaluation.judges import masis, rag
from evaluation.judges import prompt as prompt_judge
from evaluation.judges.extract import extract_json_object
from evaluation.judges.rendering import RenderedPrompt
from evaluation.judges.table import TableRules, apply_rules


class _Judge(Protocol):
    """What each judge's module provides."""

    PROMPT_VERSION: str

    def render(self, record: InputRecord) -> RenderedPrompt | None: ...
    def row_fields(self, record: InputRecord) -> dict[str, Any]: ...
    def parse(self, row: dict[str, Any], reply: dict[str, Any] | None, record: InputRecord) -> dict[str, Any]: ...
    def table_rules(self) -> TableRules: ...


_JUDGES: dict[JudgeName, _Judge] = {"rag": rag, "masis": masis, "prompt": prompt_judge}

PROMPT_VERSIONS: dict[JudgeName, str] = {name: judge.PROMPT_VERSION for name, judge in _JUDGES.items()}

#: The reply columns of a parsed row, null or empty until a reply fills them.
_NULL_COLUMNS = ("score", "faithfulness", "relevance", "completeness", "reasoning_quality", "context_relevance",
                 "answer_relevance", "semantic_similarity", "evaluation_goal", "reasoning", "explanations",
                 "uncited_claim_count", "hallucination_detected", "reason", "error",
                 "rubric_weight_satisfied", "rubric_weight_total")
_LIST_COLUMNS = ("hits", "misses", "improvement_suggestions", "citations", "invalid_citations")


def render(judge: JudgeName, record: InputRecord) -> RenderedPrompt | None:
    """The prompt of ``judge`` for ``record``; None when the judge does not apply to it."""
    return _JUDGES[judge].render(record)


def base_row(judge: JudgeName, record: InputRecord) -> dict[str, Any]:
    """The part of a parsed row that does not depend on the reply: every reply column null or empty,
    and what the judge fills whatever the reply."""
    row: dict[str, Any] = {
        "record_id": record.record_id, "conversation_id": record.conversation_id, "model": record.model,
        "judge": judge, "judge_status": "ok", **dict.fromkeys(_NULL_COLUMNS), **{c: [] for c in _LIST_COLUMNS},
        "reference_missing": record.reference_missing, "rubric_mode": False, "required_unsatisfied": False,
    }
    row.update(_JUDGES[judge].row_fields(record))
    return row


def parse_reply(
    judge: JudgeName, record: InputRecord, raw_text: str | None, prompt: RenderedPrompt | None = None
) -> dict[str, Any]:
    """A parsed row for a reply that came back (CONTRACT §2.1, then the judge's parsing steps)."""
    row = base_row(judge, record)
    prompt = prompt if prompt is not None else render(judge, record)
    key_fields = prompt.key_fields if prompt is not None else ("score",)
    # Context and rubric ids are logged text rendered in the prompt too: a quote of one is no verdict either.
    ids = [c.id for c in record.contexts] + [r.id for r in record.rubrics or []]
    reply = extract_json_object(raw_text, key_fields, [*record.untrusted_texts(), *(i for i in ids if i)])
    return _JUDGES[judge].parse(row, reply, record)


def not_applicable_row(judge: JudgeName, record: InputRecord, reason: str = "not_applicable") -> dict[str, Any]:
    """A ``skipped`` parsed row (CONTRACT §2.5: not applicable, sampled out, budget exhausted)."""
    row = base_row(judge, record)
    row.update(judge_status="skipped", reason=reason)
    return row


def call_error_row(judge: JudgeName, record: InputRecord, error: str) -> dict[str, Any]:
    """A ``call_error`` parsed row (CONTRACT §2.5): the call never returned a reply, so no score
    for any judge."""
    row = base_row(judge, record)
    row.update(judge_status="call_error", error=error)
    return row


def score_table(parsed: pl.DataFrame | pl.LazyFrame, thresholds: Thresholds | None = None) -> pl.DataFrame:
    """Every judge's post-processing (CONTRACT §2.2–2.5) over a table of parsed rows, every judge
    mixed: replaces the metrics and ``score``, adds ``verdict`` and ``clamps_applied``."""
    rules = [judge.table_rules() for judge in _JUDGES.values()]
    return apply_rules(parsed, rules, thresholds or Thresholds())
