"""Every table schema of the pipeline, in one place: staged records, parsed judgements, judge
calls, rejects and the landed ``evaluations``."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from evaluation.contract import EVALUATION_COLUMNS, InputRecord

RECORD_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "conversation_id": pl.String,
    "timestamp": pl.Datetime("us", "UTC"),
    "model": pl.String,
    "question": pl.String,
    "answer": pl.String,
    "contexts": pl.String,
    "reference": pl.String,
    "expected_outcome": pl.String,
    "rubrics": pl.String,
    "evaluation_goal": pl.String,
    "metadata": pl.String,
    "source_uri": pl.String,
    "line_no": pl.Int64,
}

_LIST = pl.List(pl.String)

#: What a call cost and when its reply came: columns of both the judged rows and the calls.
SPENT_SCHEMA: dict[str, Any] = {
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "attempts": pl.Int64,
    "cached": pl.Boolean,
    "judged_at": pl.Datetime("us", "UTC"),
}
PARSED_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "conversation_id": pl.String,
    "question_key": pl.String,
    "model": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "rules_version": pl.String,
    "judge_status": pl.String,
    "score": pl.Float64,
    "faithfulness": pl.Float64,
    "relevance": pl.Float64,
    "completeness": pl.Float64,
    "reasoning_quality": pl.Float64,
    "context_relevance": pl.Float64,
    "answer_relevance": pl.Float64,
    "semantic_similarity": pl.Float64,
    "evaluation_goal": pl.String,
    "hits": _LIST,
    "misses": _LIST,
    "reasoning": pl.String,
    "explanations": pl.String,
    "improvement_suggestions": _LIST,
    "citations": _LIST,
    "invalid_citations": _LIST,
    "uncited_claim_count": pl.Int64,
    "hallucination_detected": pl.Boolean,
    "reason": pl.String,
    "error": pl.String,
    **SPENT_SCHEMA,
    "reference_missing": pl.Boolean,
    "rubric_mode": pl.Boolean,
    "required_unsatisfied": pl.Boolean,
}

CALLS_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "record_id": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "request_hash": pl.String,
    "system_prompt": pl.String,
    "user_prompt": pl.String,
    "raw_response": pl.String,
    "error": pl.String,
    "error_class": pl.String,
    **SPENT_SCHEMA,
    "redactions": pl.Int64,
}

REJECT_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "source_uri": pl.String,
    "line_no": pl.Int64,
    "record_id": pl.String,
    "raw": pl.String,
    "reasons": _LIST,
}



def evaluation_schema() -> dict[str, Any]:
    """The landed ``evaluations`` table (without its ``dt`` partition column)."""
    schema = {c: PARSED_SCHEMA[c] for c in EVALUATION_COLUMNS if c in PARSED_SCHEMA}
    schema.update(run_id=pl.String, verdict=pl.String, clamps_applied=_LIST)
    return {c: schema[c] for c in EVALUATION_COLUMNS if c != "dt"}



def record_from_row(row: dict[str, Any]) -> InputRecord:
    """A staged record row as the judges' input model."""
    return InputRecord.model_validate(
        {
            **row,
            "contexts": json.loads(row["contexts"]) if row.get("contexts") else [],
            "rubrics": json.loads(row["rubrics"]) if row.get("rubrics") else None,
        }
    )
