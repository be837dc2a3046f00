"""The ``rag`` judge (CONTRACT §2.2, seed 003): its prompt, the reply it accepts, its parsing and
its post-processing over the parsed table.

Readings of the contract where it leaves room (the seed decides): a reply whose
``evaluation_status`` is exactly ``"success"`` is a success, exactly ``"failed"`` a judge failure;
any other value or none is a ``parse_error`` (seed 003's output format names exactly these two). On
success the three required metrics must be numbers: a ``null`` faithfulness, context_relevance or
answer_relevance is a ``parse_error`` (seed 003 lets only ``semantic_similarity`` be null).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from pydantic import BaseModel, Field, ValidationError

from evaluation.contract.config import InputRecord
from evaluation.judges.extract import Number, Text
from evaluation.judges.rendering import DATA_RULES, RenderedPrompt, context_blocks, fill, prompt_version
from evaluation.judges.rounding import round_like_python
from evaluation.judges.row import ParsedRow, parse_error
from evaluation.judges.table import TableRules, outside_unit
from evaluation.judges.verdicts import scored_rows

_RAG_SYSTEM = """judge: rag
You are an expert judge evaluating the performance of a Question Answering system.
Your task is to rate the quality of the generated answer based on the provided question, \
retrieved context, and reference answer.

""" + DATA_RULES

_RAG_USER = """### Inputs
- **User Question**:
{question}
- **Retrieved Context**:
{context}
- **Reference Answer**:
{reference}
- **Generated Answer**:
{answer}
- **Evaluation Goal**: {evaluation_goal}

### Evaluation Criteria
Please score the following metrics. All float scores must be between 0.0 and 1.0, rounded to \
two decimal places.

1. **Faithfulness**: The extent to which the generated answer is derived from the retrieved context.
   - Score rules: Rate based on the proportion of claims in the answer that are supported by the context.
   - Critical Hallucination: If the answer contradicts the context on a critical fact, score 0.0.
   - If no context/empty context, score 0.0 unless the answer explicitly states it cannot answer \
from context (in which case, score 1.0 for faithfulness).

2. **Context Relevance**: The extent to which the retrieved context contains information relevant \
to the user question.
   - Score rules: Consider both precision (how much of the context is useful) and recall (does it \
contain the necessary info). Consume `evaluation_goal`:
     - **recall**: favor including all info (fact-checking, legal, medical, safety-critical).
     - **precision**: favor concise, exact info (creative).
     - **balanced**: weigh both equally.
   - 1.0: Context contains all necessary information and little irrelevant noise.
   - 0.0: Context is completely irrelevant.

3. **Answer Relevance**: The extent to which the generated answer addresses the user question.
   - Score rules: Judge both completeness (answers all parts of the question) and directness.
   - Refusals: Valid refusals must: (1) State a clear reason, (2) Map to a named category (e.g., \
insufficient context, safety, ambiguous, out-of-scope, legal/privacy, harmful request, or user \
constraints), and (3) Demonstrate validity (e.g., cite missing info or policy). Flexible, \
natural-language refusals are accepted.
   - 1.0: Fully answers the question directly OR correctly refuses meeting all validity criteria.
   - 0.0: Completely irrelevant, refuses without meeting criteria, or refuses when it should have answered.

4. **Semantic Similarity**: The semantic closeness between the generated answer and the reference \
answer (1.0 = very similar meaning). Normalize the reference by trimming whitespace and \
lowercasing; treat it as missing if it equals "none", is empty, or is null. If missing, return \
null for this metric (do NOT return 0.0).

### Edge Cases
- Judge-relevant failures (empty inputs, malformed or partially parseable inputs, unsupported \
language): set "evaluation_status" to "failed" and "reason" to a descriptive string.
- System-level failures are handled upstream; do not mark them as judge failures.

### Output Format
Return one JSON object with exactly these keys; numeric values are floats in [0.0, 1.0] or null \
where permitted:
{{"faithfulness": <float>, "faithfulness_explanation": <string or null>, \
"context_relevance": <float>, "context_relevance_explanation": <string or null>, \
"answer_relevance": <float>, "answer_relevance_explanation": <string or null>, \
"semantic_similarity": <float or null>, "semantic_similarity_explanation": <string or null>, \
"evaluation_status": "success" or "failed", "reason": <string or null>, "error": <string or null>}}"""

RAG_METRICS = ("faithfulness", "context_relevance", "answer_relevance", "semantic_similarity")
RAG_REQUIRED = ("faithfulness", "context_relevance", "answer_relevance")
#: The weights of the score, in the order the weighted mean adds them up.
RAG_WEIGHTS = (
    ("faithfulness", 0.4), ("answer_relevance", 0.3), ("context_relevance", 0.15), ("semantic_similarity", 0.15),
)
PROMPT_VERSION = prompt_version("rag", _RAG_SYSTEM, _RAG_USER)

_GOALS = {**dict.fromkeys(("fact-checking", "legal", "medical", "safety-critical"), "recall"), "creative": "precision"}


def normalise_goal(goal: str | None) -> str:
    """CONTRACT §2.2 (6): trimmed and lowercased, fact-checking, legal, medical and safety-critical
    read ``recall``, creative ``precision``, anything else or none ``balanced``."""
    return _GOALS.get((goal or "").strip().lower(), "balanced")


def render(record: InputRecord) -> RenderedPrompt:
    """Seed 003's prompt for one record."""
    goal = normalise_goal(record.evaluation_goal)
    user = fill(_RAG_USER, {
        "question": record.question,
        "context": context_blocks(record),
        "reference": "(none)" if record.reference is None else record.reference,
        "answer": record.answer,
    }, evaluation_goal=goal)
    return RenderedPrompt("rag", PROMPT_VERSION, _RAG_SYSTEM, user, ("evaluation_status", *RAG_METRICS),
                          extra={"evaluation_goal": goal}, reply_model=RagReply)


class RagReply(BaseModel):
    """Seed 003's output format as CONTRACT §2.2 reads it: only a metric can fail validation."""

    evaluation_status: Any = Field(default=None, description="`success` or `failed`, as the judge wrote it.",
                                   json_schema_extra={"type": "string", "enum": ["success", "failed"]})
    faithfulness: Number | None = None
    context_relevance: Number | None = None
    answer_relevance: Number | None = None
    semantic_similarity: Number | None = None
    faithfulness_explanation: Text = None
    context_relevance_explanation: Text = None
    answer_relevance_explanation: Text = None
    semantic_similarity_explanation: Text = None
    reason: Text = None
    error: Text = None


def fill_row(row: ParsedRow, record: InputRecord) -> None:
    """What every rag row carries, whatever the reply: CONTRACT §2.2 (6), the normalised goal."""
    row["evaluation_goal"] = normalise_goal(record.evaluation_goal)


def parse(row: ParsedRow, reply: dict[str, Any] | None, record: InputRecord) -> ParsedRow:
    """CONTRACT §2.2 (1)–(3), types and status; the values stay unclamped for :func:`table_rules`."""
    # CONTRACT §2.2 (1): no object, or a metric that is not a number or null → parse_error, all metrics null
    if reply is None:
        return parse_error(row, "no judge JSON object")
    try:
        judged = RagReply.model_validate(reply)
    except ValidationError:
        return parse_error(row, "a metric is not a number or null")
    # CONTRACT §2.2 (2): "failed" → judge_failed, its reason and error kept; any other status, or none → parse_error
    status = judged.evaluation_status
    if status == "failed":
        row.update({"judge_status": "judge_failed", "reason": judged.reason, "error": judged.error})
        return row
    if status != "success":
        return parse_error(row, f"evaluation_status is {status!r}, not 'success' or 'failed'")
    # CONTRACT §2.2 (3): on success faithfulness, context_relevance and answer_relevance must be present
    values = judged.model_dump()
    missing = [metric for metric in RAG_REQUIRED if values[metric] is None]
    if missing:
        return parse_error(row, "missing required metrics: " + ", ".join(missing))
    explanations = {m: values[f"{m}_explanation"] for m in RAG_METRICS if values[f"{m}_explanation"] is not None}
    row.update({"faithfulness": judged.faithfulness, "context_relevance": judged.context_relevance,
                "answer_relevance": judged.answer_relevance, "semantic_similarity": judged.semantic_similarity,
                "reason": judged.reason, "error": judged.error,
                "explanations": json.dumps(explanations, ensure_ascii=False, sort_keys=True)})
    return row


def table_rules() -> TableRules:
    """CONTRACT §2.2 (3)–(5) over the parsed table."""
    values: dict[str, pl.Expr] = {}
    clamps: list[tuple[pl.Expr, str]] = []
    for metric in RAG_METRICS:
        # CONTRACT §2.2 (3): each metric clamped to [0, 1], then rounded to 2 decimals
        value = pl.col(metric)
        clamps.append((outside_unit(value), f"clamp_0_1:{metric}"))
        values[metric] = round_like_python(value.clip(0.0, 1.0), 2)
    # CONTRACT §2.2 (4): semantic_similarity is null when the reference is missing, whatever the judge said
    reference_missing = pl.col("reference_missing")
    clamps.append((reference_missing & pl.col("semantic_similarity").is_not_null(),
                   "no_reference_null:semantic_similarity"))
    values["semantic_similarity"] = (
        pl.when(reference_missing).then(pl.lit(None, dtype=pl.Float64)).otherwise(values["semantic_similarity"])
    )
    # CONTRACT §2.2 (5): score = weighted mean of the non-null metrics, renormalised over them, 3 decimals
    present = {metric: pl.col(metric).is_not_null() for metric, _ in RAG_WEIGHTS}
    numerator = sum((pl.when(present[m]).then(pl.col(m) * w).otherwise(0.0) for m, w in RAG_WEIGHTS), pl.lit(0.0))
    denominator = sum((pl.when(present[m]).then(pl.lit(w)).otherwise(0.0) for m, w in RAG_WEIGHTS), pl.lit(0.0))
    score = pl.when(denominator > 0).then(round_like_python(numerator / denominator, 3))
    return TableRules(
        scored=scored_rows("rag", "ok"),
        values=values,
        clamps=clamps,
        score=score,
        # CONTRACT §2.2 (5): a faithfulness of 0.0 (critical hallucination) is always fail
        fails=[(pl.col("faithfulness") == 0.0, "critical_hallucination_fail:verdict")],
    )
